/**
 * One model split across the mesh: a host and two workers, real rpc-servers behind real tunnels.
 */
import { afterAll, afterEach, beforeAll, expect, test } from "bun:test";
import { chat, loaded, openStream } from "../../harness/api.ts";
import { killAllChildren } from "../../harness/children.ts";
import { meshStatus, peerIds, startMeshNode, waitForFullMesh, type MeshTestNode } from "../../harness/mesh.ts";
import { encodeDirectHello } from "../../tunnel/direct-auth.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { readGgufFacts } from "../../models/gguf-info.ts";
import { needOf } from "../../models/model-need.ts";
import { statSync } from "node:fs";
import { waitFor } from "../../harness/wait.ts";

const nodes: MeshTestNode[] = [];
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
});
afterAll(killAllChildren);

let tiny: string;
let wide: string;
beforeAll(async () => {
  tiny = await testModel("tiny", "q8_0");
  wide = await testModel("wide", "q8_0");
});

interface TunnelCounters {
  fromPeerHost: { bytes: number };
  toPeer: { bytes: number };
  direct: boolean;
}
async function status(n: MeshTestNode) {
  return (await (await fetch(`${n.url}/api/status`)).json()) as {
    tunnels: Record<string, TunnelCounters>;
    zeroTransfer: { hits: number; bytesSaved: number; misses: number };
  };
}

/** `--vram` that makes a node hold `share` of what the model needs at the test context. */
async function vramFor(model: string, share: number): Promise<string[]> {
  const need = needOf(statSync(model).size, await readGgufFacts(model), 512);
  return ["--vram", String(Math.ceil(need * share))];
}

/**
 * Two workers, then a host with `--model`; resolves once the host's model runs across all three.
 * By `--vram` the model needs all three (host 40% of its need, each worker 35%); the host has the most memory.
 */
async function splitMesh(model: string, workerModels: Record<string, string>, extra: string[] = [], workerExtra: string[] = [], shares = { host: 0.4, worker: 0.35 }, rpcServers = 3) {
  const args = [...SMALL_LLAMA, ...extra];
  const workerArgs = [...args, ...(await vramFor(model, shares.worker)), ...workerExtra];
  const w1 = await startMeshNode(workerArgs, { models: workerModels });
  nodes.push(w1);
  const w2 = await startMeshNode([...workerArgs, "--join", w1.token], { models: workerModels });
  nodes.push(w2);
  const host = await startMeshNode([...args, ...(await vramFor(model, shares.host)), "--join", w1.token, "--model", model]);
  nodes.push(host);
  await waitForFullMesh([w1, w2, host]);
  const name = model.split("/").pop()!.replace(/\.gguf$/, "");
  await waitFor(async () => (await loaded(host)).find((s) => s.model_name === name && ((s as { rpc_workers?: string[] }).rpc_workers?.length ?? 0) >= rpcServers && s.state === "ready"), {
    what: `the host's model to run across ${rpcServers} rpc-servers`,
    timeoutMs: 60_000,
  });
  return { w1, w2, host, name };
}

test.each([
  ["the direct TLS path", "on"],
  ["QUIC streams only", "off"],
] as const)("a host and two workers split the tiny model over %s and answer chat completions; every worker holds layers", async (_, direct) => {
  const { w1, w2, host, name } = await splitMesh(tiny, {}, ["--rpc-direct", direct]);
  const res = await chat(host, name, 8);
  expect(res.status).toBe(200);
  const hostView = (await status(host)).tunnels;
  for (const w of [w1, w2]) {
    const counters = (await status(w)).tunnels[host.nodeId]!;
    expect(counters.fromPeerHost.bytes).toBeGreaterThan(10_000);
    expect(hostView[w.nodeId]!.direct).toBe(direct === "on");
  }
});

/** What crossed to a worker, and the share of the weights it holds (sent, or placed from its own file). */
async function workerLoad(w: MeshTestNode, host: MeshTestNode) {
  const s = await status(w);
  const crossed = s.tunnels[host.nodeId]!.fromPeerHost.bytes;
  return { crossed, saved: s.zeroTransfer.bytesSaved, hits: s.zeroTransfer.hits, misses: s.zeroTransfer.misses };
}

test("zero-transfer: with the wide model on the workers, at most 5% of their share crosses the tunnels", async () => {
  const { w1, w2, host, name } = await splitMesh(wide, { "wide-q8_0.gguf": wide });
  for (const w of [w1, w2]) {
    const { crossed, saved, hits } = await workerLoad(w, host);
    expect(hits).toBeGreaterThan(0);
    expect(crossed / (saved + crossed)).toBeLessThanOrEqual(0.05);
  }
  expect((await chat(host, name, 4)).status).toBe(200);
});

test("without the model on the workers (they lend compute only) the weights cross, and the split still loads and answers", async () => {
  const { w1, w2, host, name } = await splitMesh(wide, {}, [], ["--fetch", "off"]);
  expect((await chat(host, name, 4)).status).toBe(200);
  for (const w of [w1, w2]) {
    const { crossed, hits, misses } = await workerLoad(w, host);
    expect(hits).toBe(0);
    expect(misses).toBeGreaterThan(0);
    expect(crossed).toBeGreaterThan(10 * 2 ** 20);
  }
});

test("kill -9 of a worker mid-generation: the client gets an error, the next request runs on the nodes left", async () => {
  // The host and either worker hold it (60% and 45% of its need). The group runs it over both
  // workers, or over the first to join when the other came once that layout ran (a running layout
  // that has the memory is kept): the worker killed is one the running layout uses.
  const { w1, w2, host, name } = await splitMesh(tiny, {}, [], [], { host: 0.6, worker: 0.45 }, 2);
  const tunnels = (await status(host)).tunnels;
  const [victim, left] = (tunnels[w2.nodeId]?.toPeer.bytes ?? 0) > 0 ? [w2, w1] : [w1, w2];
  const stream = await openStream(host, name, 100_000);
  victim.child.proc.kill("SIGKILL");
  const text = await stream.rest();
  expect(text).not.toContain("[DONE]");
  expect(text).toContain('"error"');
  await waitFor(async () => (await peerIds(host)).length === 1, { what: "the host to drop the dead worker" });
  await waitFor(async () => (await chat(host, name, 4)).status === 200, { what: "a request to succeed on the nodes left", timeoutMs: 60_000 });
  const s = (await loaded(host)).find((x) => x.model_name === name) as { rpc_workers: string[] } | undefined;
  expect(s?.rpc_workers).toHaveLength(2);
  expect((await peerIds(host)).includes(left.nodeId)).toBe(true);
});

test("the direct path refuses a connection without a member's proof", async () => {
  const w1 = await startMeshNode([...SMALL_LLAMA]);
  nodes.push(w1);
  const w2 = await startMeshNode([...SMALL_LLAMA, "--join", w1.token]);
  nodes.push(w2);
  await waitForFullMesh([w1, w2]);
  const port = await waitFor(async () => (await meshStatus(w2)).peers[0]?.directPort, { what: "w1's direct port" });
  const tls = await import("node:tls");
  const socket = tls.connect({ host: "127.0.0.1", port, rejectUnauthorized: false });
  await new Promise((r) => socket.once("secureConnect", r));
  // A proof from a node that is not a peer, then an RPC HELLO: nothing may reach rpc-server.
  socket.write(encodeDirectHello("intruder", new Uint8Array(32), new Uint8Array(64)));
  socket.write(new Uint8Array([14, 24, 0, 0, 0, 0, 0, 0, 0, ...new Uint8Array(24)]));
  let received = 0;
  socket.on("data", (d) => (received += d.length));
  await new Promise((r) => socket.once("close", r));
  expect(received).toBe(0);
  await w1.child.waitForOutput(/refused direct connections without a member's proof/);
});
