/**
 * A mesh member's RPC request that declares far more than its session allocated: a SET_TENSOR
 * declaring 512 MiB right after HELLO, over the QUIC tunnel and over the direct path. rpc-server
 * sizes its receive buffer from the declared size before any payload comes, so the worker's
 * tunnel must refuse the header: the connection closes with a log line, rpc-server's memory stays
 * where it was, and rpc-server still serves the next connection. And what one member may hold of
 * an rpc-server that serves one client at a time: a few sessions at once, each of which must get
 * to work (allocate a buffer) within its setup time.
 */
import { afterAll, afterEach, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import tls from "node:tls";
import { decodeJoinToken } from "../../mesh/join-token.ts";
import { StreamKind } from "../../streams/wire.ts";
import { normalizeFingerprint } from "../../tunnel/direct-identity.ts";
import { encodeHello, HEADER_BYTES, RPC_TENSOR_BYTES, RpcCmd } from "../../tunnel/rpc-protocol.ts";
import { MAX_RPC_SESSIONS_PER_PEER, RPC_SETUP_MS } from "../../tunnel/rpc-sessions.ts";
import { killAllChildren } from "../../harness/children.ts";
import { meshStatus, startMeshNode, type MeshTestNode } from "../../harness/mesh.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { RoguePeer, type RogueMembership } from "../../harness/rogue-peer.ts";
import { waitFor, withDeadline } from "../../harness/wait.ts";

const nodes: MeshTestNode[] = [];
const rogues: RoguePeer[] = [];
const members: RogueMembership[] = [];
const sockets: tls.TLSSocket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const m of members.splice(0)) m.close();
  await Promise.all(rogues.splice(0).map((r) => r.close()));
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
});
afterAll(killAllChildren);

const MiB = 2 ** 20;
const DECLARED = 512 * MiB;

/** HELLO, then a SET_TENSOR header declaring 512 MiB and the first bytes of its tensor: no more. */
function attack(): Uint8Array {
  const header = new Uint8Array(HEADER_BYTES);
  header[0] = RpcCmd.SET_TENSOR;
  new DataView(header.buffer).setBigUint64(1, BigInt(DECLARED), true);
  return Buffer.concat([encodeHello(), header, new Uint8Array(RPC_TENSOR_BYTES)]);
}

function rssMiB(pid: number): number {
  const kb = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
  return Number(kb) / 1024;
}

/** A worker node (its rpc-server up) and a rogue member of its mesh. */
async function workerAndMember() {
  const node = await startMeshNode([...SMALL_LLAMA, "--rpc-direct", "on"]);
  nodes.push(node);
  const pid = Number((await node.child.waitForOutput(/rpc-server ready port=\d+ pid=(\d+)/, 60_000))[1]);
  const token = decodeJoinToken(node.token);
  const rogue = await RoguePeer.start();
  rogues.push(rogue);
  const member = await rogue.member(token);
  members.push(member);
  return { node, pid, token, rogue, member };
}

/** Reads a QUIC stream until it ends or fails; resolves with the bytes and how it ended. */
async function drain(recv: { read(buf: Uint8Array): Promise<number | null> }): Promise<{ bytes: number; how: string }> {
  const buf = new Uint8Array(64 * 1024);
  let bytes = 0;
  try {
    for (;;) {
      const n = await recv.read(buf);
      if (n === null) return { bytes, how: "finished" };
      bytes += n;
    }
  } catch (err) {
    return { bytes, how: `reset (${(err as Error).message.slice(0, 60)})` };
  }
}

/** rpc-server takes one connection at a time: its answer to a fresh HELLO means it is done with the last. */
async function helloAnswered(member: RogueMembership): Promise<number> {
  const stream = await member.openStream(StreamKind.RPC);
  await stream.send.writeAll(encodeHello());
  const answer = new Uint8Array(8 + 4);
  await withDeadline(stream.recv.readExact(answer), 30_000, "rpc-server to answer a member's HELLO");
  await stream.send.finish().catch(() => undefined);
  return answer[8]!;
}

/**
 * Waits until the attack's connection ends or rpc-server's memory shows the allocation (what the
 * code before the limits did), then reports both.
 */
async function outcome(ended: Promise<string>, pid: number, before: number): Promise<{ how: string | undefined; grewMiB: number }> {
  let how: string | undefined;
  void ended.then((h) => (how = h));
  await waitFor(() => how !== undefined || rssMiB(pid) - before > (0.9 * DECLARED) / MiB, { what: "the attack's connection to end (or rpc-server to allocate)", timeoutMs: 30_000 });
  return { how, grewMiB: rssMiB(pid) - before };
}

test("over the QUIC tunnel: a SET_TENSOR declaring 512 MiB is refused before rpc-server sees it", async () => {
  const { node, pid, member } = await workerAndMember();
  expect(await helloAnswered(member)).toBe(7);
  const before = rssMiB(pid);
  const stream = await member.openStream(StreamKind.RPC);
  await stream.send.writeAll(attack());
  const ended = drain(stream.recv).then((r) => r.how);
  const { how, grewMiB } = await outcome(ended, pid, before);
  console.log(`QUIC tunnel: rpc-server VmRSS ${before.toFixed(1)} MiB before, +${grewMiB.toFixed(1)} MiB after a SET_TENSOR declaring 512 MiB; the stream ${how ?? "stayed open"}`);
  expect(how).toBeDefined();
  expect(grewMiB).toBeLessThan(32);
  await node.child.waitForOutput(/rpc tunnel closed a connection.*SET_TENSOR declares 536870912 payload bytes/);
  // rpc-server is done with that connection and serves the next one, still without the 512 MiB.
  expect(await helloAnswered(member)).toBe(7);
  expect(rssMiB(pid) - before).toBeLessThan(32);
}, 90_000);

test("over the direct path, with a member's proof: the same SET_TENSOR is refused", async () => {
  const { node, pid, token, rogue, member } = await workerAndMember();
  const port = await waitFor(() => member.announcement?.signedDirect?.port, { what: "the node to announce its direct port" });
  expect(await helloAnswered(member)).toBe(7);
  const before = rssMiB(pid);
  const socket = tls.connect({ host: "127.0.0.1", port, rejectUnauthorized: false });
  sockets.push(socket);
  socket.on("error", () => undefined);
  await new Promise((r) => socket.once("secureConnect", r));
  const cert = normalizeFingerprint(socket.getPeerCertificate().fingerprint256);
  const ended = new Promise<string>((resolve) => socket.once("close", () => resolve("closed")));
  socket.write(Buffer.concat([rogue.directHello(token.secret, node.nodeId, cert), attack()]));
  const { how, grewMiB } = await outcome(ended, pid, before);
  console.log(`direct path: rpc-server VmRSS ${before.toFixed(1)} MiB before, +${grewMiB.toFixed(1)} MiB after a SET_TENSOR declaring 512 MiB; the connection ${how ?? "stayed open"}`);
  expect(how).toBe("closed");
  expect(grewMiB).toBeLessThan(32);
  await node.child.waitForOutput(/direct rpc connection closed.*SET_TENSOR declares 536870912 payload bytes/);
  expect(await helloAnswered(member)).toBe(7);
  expect(rssMiB(pid) - before).toBeLessThan(32);
}, 90_000);

test(`one member holds at most ${MAX_RPC_SESSIONS_PER_PEER} RPC sessions at once: the next is refused before it reaches rpc-server`, async () => {
  const { node, rogue, member } = await workerAndMember();
  const sessionsIn = async () => ((await meshStatus(node)) as unknown as { tunnels: Record<string, { sessionsIn: number }> }).tunnels[rogue.transport.nodeId]?.sessionsIn ?? 0;
  const held = [];
  for (let i = 0; i < MAX_RPC_SESSIONS_PER_PEER; i++) held.push(await member.openStream(StreamKind.RPC));
  await waitFor(async () => (await sessionsIn()) === MAX_RPC_SESSIONS_PER_PEER, { what: "the node to take the member's sessions" });
  const next = await member.openStream(StreamKind.RPC);
  const refused = await withDeadline(drain(next.recv), 10_000, "the session beyond the member's share to be refused");
  expect(refused.how).toContain("reset");
  expect(await sessionsIn()).toBe(MAX_RPC_SESSIONS_PER_PEER);
  // Sessions that end give their places back.
  for (const s of held) await s.send.reset(0).catch(() => undefined);
  expect(await waitFor(async () => (await helloAnswered(member).catch(() => 0)) === 7, { what: "a session to be taken again" })).toBe(true);
}, 90_000);

test(`a session that allocates nothing within ${RPC_SETUP_MS / 1000} s (HELLO, then nothing) is closed, and rpc-server serves the next`, async () => {
  const { node, member } = await workerAndMember();
  const idle = await member.openStream(StreamKind.RPC);
  await idle.send.writeAll(encodeHello());
  await withDeadline(idle.recv.readExact(new Uint8Array(12)), 30_000, "rpc-server to answer the HELLO");
  const ended = await withDeadline(drain(idle.recv), RPC_SETUP_MS + 15_000, "the idle session to be closed");
  expect(ended.how).toContain("reset");
  await node.child.waitForOutput(/closed an rpc session that allocated nothing in its setup time/);
  expect(await helloAnswered(member)).toBe(7);
}, 90_000);
