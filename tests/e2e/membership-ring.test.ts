/**
 * Issue 46: the watch ring (`mesh/watch-ring.ts`) with a real node. Eight members: the node A, a
 * second real node Z, and six members built from our own modules (real `Membership`s on loopback,
 * relays off, announcing `ring` as nodes of today do), their ids chosen so Z sits across the ring
 * from A. A watches its six neighbours and not Z, which it keeps on QUIC's keep-alives alone; a
 * member's word that Z fell silent, or any other member, drops no one that answers; and when Z
 * freezes (SIGSTOP), its neighbours drop it, tell A, and A drops it on its own probe, long before
 * its own limit for a member it does not watch. Z thawed is a member again. iroh 1.x only: the
 * ring needs datagram counts, which the 0.35 line does not keep (there everyone beats everyone).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { killAllChildren } from "../../harness/children.ts";
import { meshStatus, startMeshNode, type MeshTestNode } from "../../harness/mesh.ts";
import { startMember, stopMember, type Member } from "../../harness/members.ts";
import { TEST_LINE } from "../../harness/node.ts";
import { claimOf } from "../../harness/rogue-peer.ts";
import { waitFor } from "../../harness/wait.ts";
import { decodeJoinToken } from "../../mesh/join-token.ts";
import { PROTOCOL_VERSION } from "../../mesh/messages.ts";
import { shortId } from "../../mesh/status.ts";
import { nodeIdOf } from "../../mesh/transport-kit.ts";
import { UNWATCHED_SILENCE_MS } from "../../mesh/watch-ring.ts";

const iroh1 = TEST_LINE === "iroh1";
let a: MeshTestNode;
let z: MeshTestNode;
const members: Member[] = [];

/** Whether `id` lies strictly between `from` and `to` going up the ring of ids (wrapping). */
const between = (id: string, from: string, to: string) => (from < to ? from < id && id < to : id > from || id < to);

/** Six identities, three on each arc between A and Z: then Z is the one member of eight across the ring from A. */
function keysAround(aId: string, zId: string): Uint8Array[] {
  const up: Uint8Array[] = [];
  const down: Uint8Array[] = [];
  for (let i = 0; i < 10_000 && (up.length < 3 || down.length < 3); i++) {
    const key = Uint8Array.from(randomBytes(32));
    const id = nodeIdOf(key);
    if (id === aId || id === zId) continue;
    const arc = between(id, aId, zId) ? up : down;
    if (arc.length < 3) arc.push(key);
  }
  if (up.length < 3 || down.length < 3) throw new Error("no six identities around the ring");
  return [...up, ...down];
}

const peersOf = async (n: MeshTestNode) => (await meshStatus(n)).peers;
const aLog = (what: string, peerId: string) => a.child.output().split("\n").filter((l) => l.includes(what) && l.includes(`peer=${shortId(peerId)}`));

beforeAll(async () => {
  if (!iroh1) return;
  a = await startMeshNode([]);
  z = await startMeshNode(["--join", a.token]);
  const token = decodeJoinToken(a.token);
  for (const key of keysAround(a.nodeId, z.nodeId)) {
    const id = nodeIdOf(key);
    const claim = claimOf(token, id);
    // Z's neighbours notice its silence within 3 s (the node's own limit is 6 s).
    const m = await startMember({ secret: token.secret, secretKey: key, heartbeatMs: 500, peerTimeoutMs: 3_000, announce: { beats: true, ring: true, ...(claim ? { trust: claim } : {}) } });
    members.push(m);
    await m.m.dial(token.addr);
  }
  const all = [a.nodeId, z.nodeId, ...members.map((m) => m.t.nodeId)];
  await waitFor(async () => (await peersOf(a)).length === 7 && (await peersOf(z)).length === 7 && members.every((m) => m.m.peers.size === 7), { what: "a mesh of eight", timeoutMs: 60_000 });
  expect(all.length).toBe(8);
}, 120_000);

afterAll(async () => {
  if (z) process.kill(z.child.proc.pid, "SIGCONT");
  await Promise.all(members.splice(0).map(stopMember));
  await killAllChildren();
});

test.if(iroh1)("the node watches its six ring neighbours and not the member across the ring, which it keeps on QUIC's keep-alives", async () => {
  await waitFor(async () => {
    const peers = await peersOf(a);
    return peers.filter((p) => p.watched).length === 6 && peers.find((p) => p.nodeId === z.nodeId)?.watched === false;
  }, { what: "the node to watch its neighbours and not Z", timeoutMs: 20_000 });
  // Longer than the limit for a watched member, with no beat either way: still a member.
  const since = performance.now();
  await waitFor(async () => performance.now() - since > 8_000 && (await peersOf(a)).some((p) => p.nodeId === z.nodeId), { what: "8 s with Z still held", timeoutMs: 20_000 });
  expect(aLog("peer left", z.nodeId)).toEqual([]);
  const viewOfZ = (await peersOf(z)).find((p) => p.nodeId === a.nodeId);
  expect(viewOfZ?.watched).toBe(false);
}, 60_000);

test.if(iroh1)("a member's word that others fell silent drops no one that answers, however often it says so", async () => {
  const liar = members[0]!;
  const toA = liar.m.peers.get(a.nodeId)!;
  const named = [z.nodeId, ...members.slice(1).map((m) => m.t.nodeId), a.nodeId, liar.t.nodeId, "f".repeat(64)];
  for (let round = 0; round < 20; round++) for (const member of named) await liar.m.sender.send(toA, { v: PROTOCOL_VERSION, type: "lost", member });
  // Each named member that answers is probed and kept: after a few probe windows, the node holds all seven.
  const since = performance.now();
  await waitFor(async () => performance.now() - since > 4_000 && (await peersOf(a)).length === 7, { what: "4 s with all seven held", timeoutMs: 20_000 });
  expect((await fetch(`${a.url}/health`)).ok).toBe(true);
  for (const m of members) expect(aLog("peer left", m.t.nodeId)).toEqual([]);
  expect(aLog("peer left", z.nodeId)).toEqual([]);
}, 60_000);

test.if(iroh1)("a frozen member is dropped by its neighbours, who tell the node; the node drops it on its own probe, then holds it again once it thaws", async () => {
  // The last test's notices made Z a suspect, watched until it next sent the node a control message: the probe is for a member not watched.
  await waitFor(async () => (await peersOf(a)).find((p) => p.nodeId === z.nodeId)?.watched === false, { what: "the node to watch Z no more", timeoutMs: 30_000 });
  process.kill(z.child.proc.pid, "SIGSTOP");
  try {
    await waitFor(async () => !(await peersOf(a)).some((p) => p.nodeId === z.nodeId), { what: "the node to drop the frozen Z", timeoutMs: UNWATCHED_SILENCE_MS + 10_000 });
    // Its neighbours (all six members) said so, and Z did not answer the node's probe: not its own, longer limit.
    expect(aLog("peer left", z.nodeId).join("\n")).toContain("no answer to a probe after a member said it fell silent");
  } finally {
    process.kill(z.child.proc.pid, "SIGCONT");
  }
  await waitFor(async () => (await peersOf(a)).some((p) => p.nodeId === z.nodeId) && (await peersOf(z)).length === 7, { what: "Z to be a member again", timeoutMs: 60_000 });
}, 120_000);
