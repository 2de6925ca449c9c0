/**
 * The model-type LRU pool, end to end: a real node, real llama-server children, real HTTP.
 * Deterministic on a loaded machine: a request is held "in flight" by stopping its llama-server
 * with SIGSTOP, and every wait is on a condition with a deadline.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chat, childProps, embed, loaded, loadedNames, openStream, post, server, startStream } from "../../harness/api.ts";
import { killAllChildren } from "../../harness/children.ts";
import { frozen } from "../../harness/freeze.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA, startNode, type TestNode } from "../../harness/node.ts";
import { waitFor } from "../../harness/wait.ts";

let tiny: string;
let embedModel: string;
const nodes: TestNode[] = [];
/** Files a test makes (the node copies models from here). */
const scratch = mkdtempSync(join(tmpdir(), "mesh-pool-test-"));

beforeAll(async () => {
  tiny = await testModel("tiny", "q8_0");
  embedModel = await testModel("embed", "q8_0");
});
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
});
afterAll(async () => {
  await killAllChildren();
  rmSync(scratch, { recursive: true, force: true });
});

async function node(args: string[], models: Record<string, string> = {}): Promise<TestNode> {
  const n = await startNode([...SMALL_LLAMA, ...args], { models: { "a.gguf": tiny, "b.gguf": tiny, "c.gguf": tiny, "e.gguf": embedModel, ...models } });
  nodes.push(n);
  return n;
}

async function ok(res: Promise<Response>): Promise<void> {
  const r = await res;
  expect(r.status, await r.clone().text()).toBe(200);
  await r.arrayBuffer();
}

test("LRU per type: the least recently used llm goes when a third loads at N=2", async () => {
  const n = await node(["--max-loaded-models", "2"]);
  await ok(chat(n, "a"));
  await ok(chat(n, "b"));
  await ok(chat(n, "a"));
  await ok(chat(n, "c"));
  expect(await loadedNames(n)).toEqual(["a", "c"]);
  await ok(chat(n, "b"));
  expect(await loadedNames(n)).toEqual(["b", "c"]);
});

test("an llm and an embedding model stay loaded together at N=1", async () => {
  const n = await node([]);
  await ok(chat(n, "a"));
  await ok(embed(n, "e"));
  expect(await loadedNames(n)).toEqual(["a", "e"]);
  await ok(chat(n, "b"));
  expect(await loadedNames(n)).toEqual(["b", "e"]);
});

test("N=-1 never evicts", async () => {
  const n = await node(["--max-loaded-models", "-1"]);
  for (const m of ["a", "b", "c"]) await ok(chat(n, m));
  expect(await loadedNames(n)).toEqual(["a", "b", "c"]);
});

test("a pinned model survives LRU; with every slot pinned a new load gets 409", async () => {
  const n = await node(["--max-loaded-models", "2"]);
  await ok(post(n, "/api/v1/load", { model_name: "a", pinned: true }));
  await ok(chat(n, "b"));
  await ok(chat(n, "c"));
  expect(await loadedNames(n)).toEqual(["a", "c"]);
  await ok(post(n, "/api/v1/load", { model_name: "c", pinned: true }));
  const res = await chat(n, "b");
  expect(res.status).toBe(409);
  expect(((await res.json()) as { error: { code: string; message: string } }).error).toMatchObject({
    code: "all_slots_pinned",
    message: expect.stringContaining("pinned"),
  });
  await ok(post(n, "/api/v1/unload", { model_name: "a" }));
  await ok(chat(n, "b"));
  expect(await loadedNames(n)).toEqual(["b", "c"]);
});

test("a streaming request in flight delays the eviction of its server until it ends", async () => {
  const n = await node([]);
  const a = await frozen(n, "a");
  try {
    const stream = startStream(n, "a", 8);
    await waitFor(async () => (await server(n, "a")).is_busy, { what: "the stream to hold a" });
    const b = chat(n, "b");
    await n.child.waitForOutput(/load waits for busy servers model=b busy=a/);
    expect(await loadedNames(n)).toEqual(["a"]);
    a.thaw();
    const text = await (await stream).text();
    expect(text).toContain("data: [DONE]");
    await ok(b);
    expect(await loadedNames(n)).toEqual(["b"]);
    const log = n.child.output();
    expect(log.indexOf("unloading model model=a cause=lru")).toBeGreaterThan(log.indexOf("load waits for busy servers model=b"));
  } finally {
    a.thaw();
  }
});

test("auto-loaded requests that compete for one slot each run before their server can be evicted", async () => {
  const n = await node([]);
  const results = await Promise.all(["a", "b", "c", "a"].map((m) => chat(n, m)));
  expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200]);
  expect((await loadedNames(n)).length).toBe(1);
});

test("loads run one at a time", async () => {
  const n = await node(["--max-loaded-models", "-1"]);
  await Promise.all(["a", "b", "c"].map((m) => ok(chat(n, m))));
  const events = [...n.child.output().matchAll(/(loading model|model ready) model=(\w)/g)].map((m) => `${m[1]}:${m[2]}`);
  expect(events).toHaveLength(6);
  for (let i = 0; i < 6; i += 2) {
    expect(events[i]).toStartWith("loading model:");
    expect(events[i + 1]).toBe(`model ready:${events[i]!.split(":")[1]}`);
  }
});

test("a failing load evicts every idle server and retries once (nuclear)", async () => {
  const truncated = join(scratch, "broken.gguf");
  const bytes = readFileSync(tiny);
  writeFileSync(truncated, bytes.subarray(0, Math.floor(bytes.length / 2)));
  const n = await node(["--max-loaded-models", "-1"], { "broken.gguf": truncated });
  await ok(chat(n, "a"));
  await ok(embed(n, "e"));
  const res = await chat(n, "broken");
  expect(res.status).toBe(500);
  expect(((await res.json()) as { error: { code: string } }).error.code).toBe("model_load_failed");
  expect(n.child.output()).toMatch(/load failed; evicting every idle server and retrying once model=broken evicting=a,e|evicting=e,a/);
  expect(await loadedNames(n)).toEqual([]);
  expect([...n.child.output().matchAll(/loading model model=broken/g)]).toHaveLength(2);
});

test("a model whose file is gone gets 404 and evicts nothing", async () => {
  const n = await node([]);
  writeFileSync(join(n.modelsDir, "models.json"), JSON.stringify({ ghost: { file: "ghost.gguf" } }));
  await ok(chat(n, "a"));
  const res = await chat(n, "ghost");
  expect(res.status).toBe(404);
  expect(((await res.json()) as { error: { message: string } }).error.message).toContain("ghost.gguf does not exist");
  expect(await loadedNames(n)).toEqual(["a"]);
  expect(n.child.output()).not.toContain("loading model model=ghost");
});

test("kill -9 of a child mid-stream ends the stream with an error at once; the next request reloads it", async () => {
  // A generation of thousands of tokens: the kill lands long before it could end by itself.
  const n = await node(["--ctx-size", "16384"]);
  await ok(chat(n, "a"));
  const a = await server(n, "a");
  const stream = await openStream(n, "a", 16_000);
  process.kill(a.pid, "SIGKILL");
  const text = await stream.rest();
  expect(text).not.toContain("[DONE]");
  expect(text).toContain('"code":"model_server_exited"');
  await waitFor(async () => (await loaded(n)).length === 0, { what: "the dead server to leave the pool" });
  await ok(chat(n, "a"));
  expect((await server(n, "a")).pid).not.toBe(a.pid);
});

test("a client that disconnects aborts the upstream request and frees the server", async () => {
  // A generation far longer than the test, so only the cancel can end it (400 tokens could finish
  // before the abort reached llama-server on a loaded machine, and then nothing is cancelled).
  const n = await node(["--ctx-size", "16384"]);
  const abort = new AbortController();
  const stream = await openStream(n, "a", 16_000, abort.signal);
  const a = await server(n, "a");
  abort.abort();
  await stream.reader.cancel().catch(() => undefined);
  await waitFor(async () => !(await server(n, "a")).is_busy, { what: "the server to be released" });
  const log = join(n.stateDir, "logs", "llama-server-a.log");
  await waitFor(() => readFileSync(log, "utf8").includes("cancel task"), { what: "llama-server to cancel the generation" });
  expect(a.pid).toBe((await server(n, "a")).pid);
});

test("an idle model unloads after --idle-unload", async () => {
  const n = await node(["--idle-unload", "1s"]);
  await ok(chat(n, "a"));
  expect(await loadedNames(n)).toEqual(["a"]);
  await waitFor(async () => (await loaded(n)).length === 0, { what: "idle unload", timeoutMs: 30_000 });
  expect(n.child.output()).toContain("unloading model model=a cause=idle");
});

test("a node that stops on SIGTERM stops every llama-server it started", async () => {
  const n = await node(["--max-loaded-models", "-1"]);
  await ok(chat(n, "a"));
  await ok(embed(n, "e"));
  const pids = (await loaded(n)).map((s) => s.pid);
  expect(pids).toHaveLength(2);
  expect(await nodes.pop()!.stop()).toBe(0);
  const alive = (pid: number) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  expect(pids.filter(alive)).toEqual([]);
});

describe("explicit load and unload", () => {
  test("load with a ctx_size and llamacpp_args, unload one and all", async () => {
    const n = await node(["--max-loaded-models", "-1"]);
    await ok(post(n, "/api/v1/load", { model_name: "a", ctx_size: 256, llamacpp_args: "--batch-size 64" }));
    await ok(embed(n, "e"));
    const a = await server(n, "a");
    const props = await childProps(n, a);
    expect(props.default_generation_settings.n_ctx).toBe(256);
    await ok(post(n, "/api/v1/unload", { model_name: "a" }));
    expect(await loadedNames(n)).toEqual(["e"]);
    await ok(post(n, "/api/v1/unload", ""));
    expect(await loadedNames(n)).toEqual([]);
  });
});
