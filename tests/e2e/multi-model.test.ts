/**
 * The multi-model mesh with real nodes: two models, one too big for any single node (by `--vram`),
 * groups and hosts formed by the allocation and election rules, every node's API answering for
 * both, the files fetched from a peer, a host killed and its model back on the nodes left, a fifth
 * node assigned by the rules, and a model let go when idle.
 */
import { afterAll, afterEach, beforeAll, expect, test } from "bun:test";
import OpenAI from "openai";
import { killAllChildren } from "../../harness/children.ts";
import { meshStatus, startMeshNode, waitForFullMesh, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { waitFor } from "../../harness/wait.ts";
import { loaded, server } from "../../harness/api.ts";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ANSWERED_BY_HEADER } from "../../mesh/mesh-headers.ts";

const nodes: MeshTestNode[] = [];
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
});
afterAll(killAllChildren);

const WIDE = "wide-q8_0";
const TINY = "tiny-q8_0";
let files: Record<string, string>;
beforeAll(async () => {
  files = { [`${WIDE}.gguf`]: await testModel("wide", "q8_0"), [`${TINY}.gguf`]: await testModel("tiny", "q8_0") };
});

interface ListedModel {
  id: string;
  status: string;
  host: string | null;
  mesh?: { status: string; host: string | null; nodes_serving: string[]; split: boolean };
}
interface ModelsStatus {
  models: { assigned: string | null };
}

const client = (n: MeshTestNode) => new OpenAI({ baseURL: `${n.url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 30_000 });
const listed = async (n: MeshTestNode) => (await client(n).models.list()).data as unknown as ListedModel[];
const assigned = async (n: MeshTestNode) => ((await meshStatus(n)) as unknown as ModelsStatus).models.assigned;

const chatStatus = async (via: MeshTestNode, model: string) =>
  (await fetch(`${via.url}/v1/chat/completions`, { method: "POST", body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }], max_tokens: 2 }) })).status;

/** A chat completion through `via`; resolves with the node that answered it. */
async function answeredBy(via: MeshTestNode, model: string): Promise<string | null> {
  const { data, response } = await client(via).chat.completions.create({ model, messages: [{ role: "user", content: "hi" }], max_tokens: 2 }).withResponse();
  expect(data.choices[0]!.message).toBeDefined();
  return response.headers.get(ANSWERED_BY_HEADER);
}

async function waitForModel(n: MeshTestNode, model: string, check: (m: ListedModel) => boolean, what: string, timeoutMs = 60_000) {
  return waitFor(async () => (await listed(n)).find((m) => m.id === model && check(m)), { what, timeoutMs });
}

// wide needs about 102 MiB at this context (file + KV + margin), tiny under 1 MiB: wide needs two
// of these nodes, tiny fits anywhere.
const vram = (mib: number) => ["--vram", `${mib}MiB`];

test("two models over four nodes: groups, hosts and splits follow the rules; every node answers for both; a killed host's model comes back; a fifth node stands by in a group that runs", async () => {
  const seeder = await startMeshNode([...SMALL_LLAMA, ...vram(64), "--model", WIDE, "--model", TINY], { models: files, name: "seeder" });
  nodes.push(seeder);
  // The seeder can hold only tiny: rule 2 (nobody serves it, it fits, it is on its disk).
  await waitFor(async () => (await assigned(seeder)) === TINY, { what: "the seeder to take tiny" });
  const b = await startMeshNode([...SMALL_LLAMA, ...vram(64), "--join", seeder.token], { name: "b" });
  nodes.push(b);
  // Alone in wide's group, b cannot run it: the catalog says so and requests get 503 with Retry-After.
  await waitForModel(seeder, WIDE, (m) => m.status === "needs-capacity", "wide to need capacity");
  const short = await fetch(`${seeder.url}/v1/chat/completions`, { method: "POST", body: JSON.stringify({ model: WIDE, messages: [] }) });
  expect(short.status).toBe(503);
  expect(short.headers.get("retry-after")).toBe("30");
  expect(((await short.json()) as { error: { message: string } }).error.message).toContain("needs");

  const c = await startMeshNode([...SMALL_LLAMA, ...vram(80), "--join", seeder.token], { name: "c" });
  nodes.push(c);
  const d = await startMeshNode([...SMALL_LLAMA, ...vram(48), "--join", seeder.token], { name: "d" });
  nodes.push(d);
  const all = [seeder, b, c, d];
  await waitForFullMesh(all);

  // wide's group is b, c and d; c has the most memory and hosts it over its own rpc-server and b's
  // (and d's, when d joined within the group's settling time; otherwise d stands by with the file).
  const group = [b, c, d].map((n) => n.nodeId).sort();
  for (const n of all) {
    await waitForModel(n, WIDE, (m) => m.status === "loaded" && m.host === c.nodeId && JSON.stringify(m.mesh?.nodes_serving) === JSON.stringify(group), `${n.child.name} to see wide ready on c`);
    await waitForModel(n, TINY, (m) => m.status === "loaded" && m.host === seeder.nodeId, `${n.child.name} to see tiny ready on the seeder`);
  }
  const split = await waitFor(async () => (await loaded(c)).find((s) => s.model_name === WIDE && s.state === "ready" && ((s as { rpc_workers?: string[] }).rpc_workers?.length ?? 0) >= 2), {
    what: "c to run wide over its own rpc-server and b's at least",
    timeoutMs: 60_000,
  });
  expect(split).toBeDefined();
  expect(await loaded(b)).toEqual([]);
  expect(await loaded(d)).toEqual([]);
  // b and d got wide's file from the seeder over the mesh.
  for (const n of [b, d]) expect((await listed(n)).find((m) => m.id === WIDE)?.status).toBe("loaded");

  for (const via of all) {
    expect(await answeredBy(via, WIDE)).toBe(c.nodeId);
    expect(await answeredBy(via, TINY)).toBe(seeder.nodeId);
  }

  // kill -9 of wide's host: b (64) and d (48) still hold it; b hosts. Until then requests get 503,
  // never hang. How fast is the lab's to measure (tests/lab, bench/faults): here a loaded 2-core
  // machine only has to show it comes back, within generous deadlines.
  c.child.proc.kill("SIGKILL");
  const killedAt = performance.now();
  const statuses = new Set<number>();
  let back = 0;
  let slowest = 0;
  const said = new Map<string, number>();
  while (!back) {
    const started = performance.now();
    const res = await fetch(`${seeder.url}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ model: WIDE, messages: [{ role: "user", content: "hi" }], max_tokens: 2 }),
      signal: AbortSignal.timeout(30_000),
    });
    const text = await res.text();
    statuses.add(res.status);
    slowest = Math.max(slowest, performance.now() - started);
    if (res.status === 200) back = performance.now() - killedAt;
    else {
      said.set(text.slice(0, 200), (said.get(text.slice(0, 200)) ?? 0) + 1);
      await Bun.sleep(250);
    }
    // What the refusals said, should it not come back (each node's log tail is in the runner's report).
    if (performance.now() - killedAt > 60_000) throw new Error(`wide not back after 60 s; the answers it got, with their counts: ${JSON.stringify([...said])}`);
  }
  console.log(`wide answered again ${Math.round(back)} ms after its host was killed (statuses seen: ${[...statuses].join(", ")}; slowest answer ${Math.round(slowest)} ms)`);
  expect([...statuses].every((s) => s === 200 || s === 503)).toBe(true);
  // Each node drops the dead host on its own heartbeat tick: d may take a moment longer than the seeder.
  await waitFor(async () => (await chatStatus(d, WIDE)) === 200, { what: "d to route wide to its new host", timeoutMs: 30_000 });
  expect(await answeredBy(d, WIDE)).toBe(b.nodeId);

  // A fifth node without a model: tiny runs alone on the seeder (nothing to gain), wide runs split,
  // so rule 3 puts it in wide's group (after fetching the file). b's layout runs and has the memory
  // it needs, so b does not reload for it: the fifth node stands by, ready should d or b go.
  const running = await server(b, WIDE);
  const e = await startMeshNode([...SMALL_LLAMA, ...vram(64), "--join", seeder.token], { name: "e" });
  nodes.push(e);
  await waitFor(async () => (await assigned(e)) === WIDE, { what: "the fifth node to join wide's group" });
  await waitForModel(e, WIDE, (m) => m.status === "loaded" && m.host === b.nodeId && (m.mesh?.nodes_serving ?? []).includes(e.nodeId), "e to see wide on b with itself in the group");
  expect(await answeredBy(e, WIDE)).toBe(b.nodeId);
  expect((await server(b, WIDE)).pid).toBe(running.pid);
  expect(await answeredBy(e, TINY)).toBe(seeder.nodeId);
});

test("a model with no requests for --idle-unload is let go by its group; a request brings it back on demand", async () => {
  const host = await startMeshNode([...SMALL_LLAMA, "--idle-unload", "4s", "--model", TINY], { models: { [`${TINY}.gguf`]: files[`${TINY}.gguf`]! }, name: "host" });
  nodes.push(host);
  // The founder loads its model at once: requests keep it in use until the group is whole (the
  // other node's endpoint start and copy take longer than the idle time).
  const other = await whileInUse(host, async () => {
    // Asked for explicitly, without the file: it is fetched from the host.
    const joiner = await startMeshNode([...SMALL_LLAMA, "--idle-unload", "4s", "--join", host.token, "--model", TINY], { name: "other" });
    nodes.push(joiner);
    await waitFor(async () => (await assigned(joiner)) === TINY && (await listed(joiner)).find((m) => m.id === TINY)?.mesh?.nodes_serving.length === 2, {
      what: "both nodes in tiny's group",
    });
    await waitForModel(joiner, TINY, (m) => m.status === "loaded", "tiny ready");
    return joiner;
  });
  // No requests: the host unloads it, says so, and both leave the group and stay out of it.
  await waitFor(async () => (await assigned(host)) === null && (await assigned(other)) === null, { what: "both nodes to let tiny go", timeoutMs: 30_000 });
  const entry = await waitForModel(other, TINY, (m) => m.status === "unloaded", "tiny unloaded everywhere");
  expect(entry.mesh?.nodes_serving).toEqual([]);
  expect(await loaded(host)).toEqual([]);
  // A request loads it on demand where it lands (the file is on both nodes now).
  expect(await answeredBy(other, TINY)).toBe(other.nodeId);
  // It is in use again (kept so while the rules act: a loaded machine can take longer to show
  // it than the 4 s idle time), so the rules give it a group, hosted where it already runs.
  await whileInUse(other, async () => {
    await waitForModel(host, TINY, (m) => m.status === "loaded" && m.host === other.nodeId, "the host to see tiny served by the other node");
    await waitFor(async () => (await assigned(host)) === TINY && (await assigned(other)) === TINY, { what: "both back in tiny's group" });
    // The host may have begun a load of its own before it heard the other node serves it (its log
    // says "another node hosts the model now"): that server comes up draining and is stopped.
    let running: unknown[] = [];
    await waitFor(async () => (running = await loaded(host)).length === 0, { what: () => `the host to run no server of tiny (it runs ${JSON.stringify(running)})` });
  });
});

/** Runs `check` while a request for tiny reaches `node` every half second, so no idle time runs out meanwhile. */
async function whileInUse<T>(node: MeshTestNode, check: () => Promise<T>): Promise<T> {
  let busy = true;
  const requests = (async () => {
    while (busy) {
      await fetch(`${node.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: TINY, messages: [{ role: "user", content: "hi" }], max_tokens: 1 }) }).then((r) => r.arrayBuffer(), () => undefined);
      await Bun.sleep(500); // pacing of the keep-alive requests, not a wait on a condition
    }
  })();
  try {
    return await check();
  } finally {
    busy = false;
    await requests;
  }
}

test("a model known only by its source URL is fetched, verified and served by the node asked for it; a wrong hash installs nothing", async () => {
  const tiny = files[`${TINY}.gguf`]!;
  const sha256 = new Bun.CryptoHasher("sha256").update(await Bun.file(tiny).arrayBuffer()).digest("hex");
  // Stands in for a Hugging Face resolve URL: the file, with its SHA-256 as the ETag (the bad path lies about it).
  const source = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: (req) => new Response(Bun.file(tiny), { headers: { etag: `"${new URL(req.url).pathname === "/bad.gguf" ? "0".repeat(64) : sha256}"` } }),
  });
  const dir = mkdtempSync(join(tmpdir(), "mesh-test-registry-"));
  try {
    const registry = (name: string, path: string) => {
      const file = join(dir, `${name}.json`);
      writeFileSync(file, JSON.stringify({ [name]: { file: `${name}.gguf`, source: `http://127.0.0.1:${source.port}${path}` } }));
      return { "models.json": file };
    };
    const good = await startMeshNode([...SMALL_LLAMA, "--model", "from-source"], { models: registry("from-source", "/tiny.gguf"), name: "good" });
    nodes.push(good);
    const bad = await startMeshNode([...SMALL_LLAMA, "--model", "bad-source"], { models: registry("bad-source", "/bad.gguf"), name: "bad" });
    nodes.push(bad);

    await waitForModel(good, "from-source", (m) => m.status === "loaded" && m.host === good.nodeId, "the good node to fetch and serve its model");
    expect(await answeredBy(good, "from-source")).toBe(good.nodeId);
    await good.child.waitForOutput(/fetching from-source: 100%/);
    expect(existsSync(join(good.modelsDir, "from-source.gguf"))).toBe(true);

    await bad.child.waitForOutput(/arrived with SHA-256 [0-9a-f]{64}, expected 0{64}/);
    expect(existsSync(join(bad.modelsDir, "bad-source.gguf"))).toBe(false);
    const res = await fetch(`${bad.url}/v1/chat/completions`, { method: "POST", body: JSON.stringify({ model: "bad-source", messages: [] }) });
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBeTruthy();
  } finally {
    source.stop(true);
    rmSync(dir, { recursive: true, force: true });
  }
});
