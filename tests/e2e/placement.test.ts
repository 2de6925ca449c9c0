/**
 * Placement with real nodes: a host never runs a model beyond the memory it offers, a burst of
 * joins costs one load (the group settles first), a member the running layout does not need
 * joining costs none, and the model a node hosts for its mesh is not evicted by a load on demand
 * unless the operator allows it, in which case every status shown matches the processes that run.
 */
import { afterAll, afterEach, beforeAll, expect, test } from "bun:test";
import { chat, loaded, server } from "../../harness/api.ts";
import { killAllChildren } from "../../harness/children.ts";
import { meshStatus, startMeshNode, waitForFullMesh, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { parseScrape, valueOf } from "../../harness/prometheus.ts";
import { waitFor } from "../../harness/wait.ts";

const nodes: MeshTestNode[] = [];
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
});
afterAll(killAllChildren);

const WIDE = "wide-q8_0";
const TINY = "tiny-q8_0";
const TINY_F32 = "tiny-f32";
let files: Record<string, string>;
beforeAll(async () => {
  files = { [`${WIDE}.gguf`]: await testModel("wide", "q8_0"), [`${TINY}.gguf`]: await testModel("tiny", "q8_0"), [`${TINY_F32}.gguf`]: await testModel("tiny", "f32") };
});

interface Listed {
  id: string;
  status: string;
  mesh?: { status: string; host: string | null; nodes_serving: string[] };
}
const listed = async (n: MeshTestNode) => ((await (await fetch(`${n.url}/v1/models`)).json()) as { data: Listed[] }).data;
const loads = async (n: MeshTestNode) => valueOf(parseScrape(await (await fetch(`${n.url}/metrics`)).text()), "mesh_model_loads_total");
const catalogOf = async (n: MeshTestNode) => ((await meshStatus(n)) as unknown as { models: { catalog: { name: string; nodesOnDisk: string[] }[] } }).models.catalog;
const vram = (mib: number) => ["--vram", `${mib}MiB`];

test("wide (about 102 MiB) on a 64 MiB host: not loaded alone; three workers joining at once cost one load; a fourth member it does not need, none", async () => {
  const host = await startMeshNode([...SMALL_LLAMA, ...vram(64), "--model", WIDE], { models: { [`${WIDE}.gguf`]: files[`${WIDE}.gguf`]! }, name: "host" });
  nodes.push(host);
  await waitFor(async () => (await listed(host)).find((m) => m.id === WIDE)?.mesh?.status === "needs-capacity", { what: "wide to need capacity" });
  const alone = await chat(host, WIDE);
  expect(alone.status).toBe(503);
  expect(alone.headers.get("retry-after")).toBe("30");
  expect(await loaded(host)).toEqual([]);

  // Three workers at once: each one alone would give the group the memory it needs.
  const workers = await Promise.all(["w1", "w2", "w3"].map((name) => startMeshNode([...SMALL_LLAMA, ...vram(48), "--join", host.token], { name })));
  nodes.push(...workers);
  await waitForFullMesh([host, ...workers]);
  const running = await waitFor(async () => (await loaded(host)).find((s) => s.model_name === WIDE && s.state === "ready"), { what: "the host to run wide", timeoutMs: 90_000 });
  expect((await chat(workers[0]!, WIDE)).status).toBe(200);
  expect(await loads(host)).toBe(1);

  // A fourth member: wide runs and has the memory it needs, so the member stands by in its group.
  const late = await startMeshNode([...SMALL_LLAMA, ...vram(48), "--join", host.token], { name: "late" });
  nodes.push(late);
  await waitFor(async () => (await listed(host)).find((m) => m.id === WIDE)?.mesh?.nodes_serving.includes(late.nodeId), { what: "the late member to join wide's group", timeoutMs: 60_000 });
  // It copies wide's file like any member: once it has it, the group is whole and nothing is left to settle.
  await waitFor(async () => (await catalogOf(host)).find((m) => m.name === WIDE)?.nodesOnDisk.includes(late.nodeId), { what: "the late member to have wide", timeoutMs: 60_000 });
  for (const via of [late, ...workers]) expect((await chat(via, WIDE)).status).toBe(200);
  expect((await server(host, WIDE)).pid).toBe(running.pid);
  expect(await loads(host)).toBe(1);
  expect(host.child.output()).not.toContain("loading the model again");
});

test("the model hosted for the mesh is not evicted by a load on demand; allowed, the group lets it go and every status matches the processes; alone, a node swaps", async () => {
  const models = { [`${TINY}.gguf`]: files[`${TINY}.gguf`]!, [`${TINY_F32}.gguf`]: files[`${TINY_F32}.gguf`]! };
  const held = await startMeshNode([...SMALL_LLAMA, "--model", TINY, "--max-loaded-models", "1"], { models, name: "held" });
  nodes.push(held);
  // Alone, a node is a single box and swaps; with a peer, its model is the mesh's.
  const peer = await startMeshNode([...SMALL_LLAMA, "--fetch", "off", "--join", held.token], { name: "peer" });
  nodes.push(peer);
  await waitForFullMesh([held, peer]);
  const first = await server(held, TINY);
  const refused = await chat(held, TINY_F32);
  expect(refused.status).toBe(409);
  const error = ((await refused.json()) as { error: { code: string; message: string } }).error;
  expect(error.code).toBe("slot_held_for_mesh");
  expect(error.message).toContain("--evict-mesh-models on");
  expect((await loaded(held)).map((s) => [s.model_name, s.pid])).toEqual([[TINY, first.pid]]);
  expect((await chat(held, TINY)).status).toBe(200);

  // Allowed: a two-node mesh, where both nodes must agree with the processes afterwards.
  const a = await startMeshNode([...SMALL_LLAMA, "--model", TINY, "--max-loaded-models", "1", "--evict-mesh-models", "on"], { models, name: "a" });
  nodes.push(a);
  const b = await startMeshNode([...SMALL_LLAMA, "--fetch", "off", "--join", a.token], { name: "b" });
  nodes.push(b);
  await waitForFullMesh([a, b]);
  await server(a, TINY);
  expect((await chat(a, TINY_F32)).status).toBe(200);
  expect((await loaded(a)).map((s) => s.model_name)).toEqual([TINY_F32]);
  const statusOf = async (n: MeshTestNode, model: string) => (await listed(n)).find((m) => m.id === model)?.mesh?.status;
  for (const n of [a, b]) {
    await waitFor(async () => (await statusOf(n, TINY)) === "unloaded" && (await statusOf(n, TINY_F32)) === "ready", { what: `${n.child.name} to show tiny unloaded and tiny-f32 ready, as the processes are` });
  }
  // Asked for again, it loads on demand, and the statuses follow.
  expect((await chat(b, TINY)).status).toBe(200);
  expect((await loaded(a)).map((s) => s.model_name)).toEqual([TINY]);
  for (const n of [a, b]) await waitFor(async () => (await statusOf(n, TINY)) === "ready" && (await statusOf(n, TINY_F32)) === "unloaded", { what: `${n.child.name} to show tiny ready again` });

  // A node alone is a single box: a load on demand takes the slot, as llama-swap would.
  const single = await startMeshNode([...SMALL_LLAMA, "--model", TINY, "--max-loaded-models", "1"], { models, name: "single" });
  nodes.push(single);
  await server(single, TINY);
  expect((await chat(single, TINY_F32)).status).toBe(200);
  expect((await loaded(single)).map((s) => s.model_name)).toEqual([TINY_F32]);
});
