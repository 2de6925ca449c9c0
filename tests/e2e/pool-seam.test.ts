/**
 * Issue 45: the pool at its seam, without a node: a real `Pool` of real `llama-server` children
 * over real test models from a real `ModelStore`, driven through its own verbs (acquire, load,
 * unload, reload, close) and watched through its hooks (`onEvict`, `onChange`) and the registry of
 * its servers its readers are given (`LoadedServers`). One model at a
 * time: a second waits for the first's request to finish, then takes its place (LRU); a model
 * whose file went missing is refused before anything is evicted for it.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLog } from "../../base/log.ts";
import { killAllChildren } from "../../harness/children.ts";
import { devLlama } from "../../harness/llama.ts";
import { testModel } from "../../harness/models.ts";
import { waitFor } from "../../harness/wait.ts";
import { ModelStore, type ModelInfo } from "../../models/model-store.ts";
import type { EvictionCause } from "../../pool/pool-types.ts";
import { Pool } from "../../pool/pool.ts";
import { LoadedServers } from "../../pool/loaded-servers.ts";

const dirs: string[] = [];
let pool: Pool;
let models: ModelInfo[];
const evicted: [string, EvictionCause][] = [];
let changes = 0;
// Made before the pool, as the node makes it for the parts that read what the pool runs.
const servers = new LoadedServers();

beforeAll(async () => {
  const modelsDir = mkdtempSync(join(tmpdir(), "mesh-pool-seam-models-"));
  const stateDir = mkdtempSync(join(tmpdir(), "mesh-pool-seam-state-"));
  dirs.push(modelsDir, stateDir);
  copyFileSync(await testModel("tiny", "q8_0"), join(modelsDir, "tiny-q8_0.gguf"));
  copyFileSync(await testModel("tiny", "f32"), join(modelsDir, "tiny-f32.gguf"));
  models = await new ModelStore({ modelsDir, extraFiles: [], hasGpu: false }).refresh();
  pool = new Pool({
    llama: devLlama(),
    stateDir,
    maxLoadedModels: 1,
    idleUnloadMs: 0,
    loadTimeoutMs: 60_000,
    defaultCtxSize: 512,
    defaultArgs: "--threads 1 --threads-batch 1 --parallel 1",
    log: createLog("text", () => undefined),
    onEvict: (model, cause) => void evicted.push([model, cause]),
    onChange: () => void changes++,
    servers,
  });
}, 120_000);
afterAll(async () => {
  await pool?.close();
  await killAllChildren();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const model = (name: string) => models.find((m) => m.name === name)!;
const names = () => pool.loaded().map((s) => `${s.model}:${s.state}`);

test("a request's acquire loads its model; the server answers, and the lease gives it back", async () => {
  const before = changes;
  const lease = await pool.acquire(model("tiny-q8_0"));
  expect(names()).toEqual(["tiny-q8_0:ready"]);
  // Its readers see what it runs through the registry they were given before it existed.
  expect(servers.server("tiny-q8_0")).toBe(lease.server);
  expect(servers.loaded()).toEqual(pool.loaded());
  expect(lease.server.busy).toBe(true);
  const res = await fetch(`${lease.server.url}/health`, { headers: lease.server.headers });
  expect(res.status).toBe(200);
  lease.release();
  expect(lease.server.busy).toBe(false);
  expect(changes).toBeGreaterThan(before);
}, 60_000);

test("one model at a time: a second waits while the first serves a request, then takes its place (lru)", async () => {
  const first = await pool.acquire(model("tiny-q8_0"));
  const second = pool.load(model("tiny-f32"));
  let loaded = false;
  void second.then(() => (loaded = true));
  // Its request still holds the first: the second waits, nothing is evicted.
  await waitFor(() => pool.isLoading("tiny-f32"), { what: "the second load to be under way" });
  expect(loaded).toBe(false);
  expect(evicted).toEqual([]);
  first.release();
  await second;
  expect(names()).toEqual(["tiny-f32:ready"]);
  expect(evicted).toEqual([["tiny-q8_0", "lru"]]);
  expect([...servers.keys()]).toEqual(["tiny-f32"]);
}, 90_000);

test("reload stops the server and starts another of the same model; unload lets it go on request", async () => {
  const old = pool.server("tiny-f32")!;
  const again = await pool.reload(model("tiny-f32"));
  expect(again).not.toBe(old);
  expect(old.state).toBe("stopped");
  expect(evicted.at(-1)).toEqual(["tiny-f32", "reload"]);
  expect(await pool.unload("tiny-f32")).toEqual(["tiny-f32"]);
  expect(pool.loaded()).toEqual([]);
  expect(evicted.at(-1)).toEqual(["tiny-f32", "unload"]);
  await expect(pool.unload("tiny-f32")).rejects.toThrow('model "tiny-f32" is not loaded');
}, 90_000);

// The bench's first step (router-overhead.ts): an unload comes while the model's server starts.
test("an unload while its model loads: the request that waited is served, then the server stops", async () => {
  const acquired = pool.acquire(model("tiny-f32"));
  await waitFor(() => pool.server("tiny-f32")?.state === "starting", { what: "the server to start", timeoutMs: 30_000, intervalMs: 2 });
  const unloaded = pool.unload("tiny-f32");
  const lease = await acquired;
  expect(lease.server.state).toBe("draining");
  lease.release();
  expect(await unloaded).toEqual(["tiny-f32"]);
  expect(lease.server.state).toBe("stopped");
  expect(pool.loaded()).toEqual([]);
}, 90_000);

test("a model whose file went missing is refused before anything is evicted for it", async () => {
  await pool.load(model("tiny-q8_0"));
  const gone = { ...model("tiny-f32"), name: "gone", path: join(dirs[0]!, "gone.gguf") };
  const evictedBefore = evicted.length;
  await expect(pool.load(gone)).rejects.toThrow("does not exist");
  expect(names()).toEqual(["tiny-q8_0:ready"]);
  expect(evicted.length).toBe(evictedBefore);
}, 90_000);

test("close stops every server and refuses loads from then on", async () => {
  const server = pool.server("tiny-q8_0")!;
  await pool.close();
  expect(server.state).toBe("stopped");
  expect(pool.loaded()).toEqual([]);
  await expect(pool.load(model("tiny-f32"))).rejects.toThrow("shutting down");
}, 60_000);
