/**
 * Issue 46: the messages that keep an idle mesh cheap, misused by a member built from our own
 * modules. A node's whole announcement goes once per connection; after that a heartbeat is a
 * `beat` and a change a `patch` of what moved, and a peer out of step asks for the whole one with
 * `want` (`mesh/announcement-delta.ts`). A member that asks again and again is answered once a
 * heartbeat; one whose beats never follow is asked once a heartbeat; a patch that follows changes
 * what the node holds of it, and a patch of junk (a field of the wrong shape, who the node is, a
 * field no node knows, a required field taken away) drops that member alone, as a junk
 * announcement does. A real node on loopback, relays off.
 */
import { afterAll, afterEach, beforeAll, expect, test } from "bun:test";
import { killAllChildren } from "../../harness/children.ts";
import { meshStatus, startMeshNode, type MeshTestNode } from "../../harness/mesh.ts";
import { RoguePeer, type RogueMembership } from "../../harness/rogue-peer.ts";
import { waitFor } from "../../harness/wait.ts";
import { decodeJoinToken } from "../../mesh/join-token.ts";
import { PROTOCOL_VERSION } from "../../mesh/messages.ts";
import { HEARTBEAT_MS } from "../../node/mesh-node.ts";

let node: MeshTestNode;
const rogues: RoguePeer[] = [];
const members: RogueMembership[] = [];

beforeAll(async () => {
  node = await startMeshNode([]);
});
afterEach(async () => {
  for (const m of members.splice(0)) m.close();
  await Promise.all(rogues.splice(0).map((r) => r.close()));
});
afterAll(async () => {
  await node?.stop();
  await killAllChildren();
});

const v = PROTOCOL_VERSION;
const listed = async (id: string) => (await meshStatus(node)).peers.find((p) => p.nodeId === id);
const healthy = async () => (await fetch(`${node.url}/health`)).ok;

/** A member that reads beats (it says so, and the node then sends it beats and patches), quiet once the node holds that. */
async function beatingMember(): Promise<RogueMembership> {
  const rogue = await RoguePeer.start();
  rogues.push(rogue);
  const m = await rogue.member(decodeJoinToken(node.token));
  members.push(m);
  // It says so at once, then sends nothing of its own: the node, hearing nothing but QUIC's
  // answers, beats to it within a heartbeat.
  m.mine.beats = true;
  m.mine.seq++;
  await m.send({ v, type: "announce", announcement: m.mine });
  m.quiet();
  await waitFor(async () => (await listed(m.mine.nodeId)) !== undefined && (m.heardTypes.get("beat") ?? 0) > 0, { what: "the node to hold the member and beat to it", timeoutMs: 20_000 });
  return m;
}

/** Waits until the node has dropped the member for junk: its connection closes, and the node lists it no more. */
async function droppedForJunk(m: RogueMembership): Promise<string> {
  const reason = await m.conn.closed;
  await waitFor(async () => (await listed(m.mine.nodeId)) === undefined, { what: "the node to drop the member", timeoutMs: 10_000 });
  expect(await healthy()).toBe(true);
  return reason;
}

test("a flood of wants is answered once a heartbeat at most; the member stays", async () => {
  const m = await beatingMember();
  const before = m.heardTypes.get("announce") ?? 0;
  const t0 = performance.now();
  for (let i = 0; i < 500; i++) await m.send({ v, type: "want" });
  await waitFor(() => (m.heardTypes.get("announce") ?? 0) > before, { what: "the node to answer a want with its whole announcement" });
  for (let i = 0; i < 500; i++) await m.send({ v, type: "want" });
  // A heartbeat later, a second flood may be answered once more, never more.
  await waitFor(async () => (await healthy()) && performance.now() - t0 > HEARTBEAT_MS + 500, { what: "a heartbeat to pass" });
  const answers = (m.heardTypes.get("announce") ?? 0) - before;
  expect(answers).toBeGreaterThanOrEqual(1);
  expect(answers).toBeLessThanOrEqual(1 + Math.ceil((performance.now() - t0) / HEARTBEAT_MS));
  expect(await listed(m.mine.nodeId)).toBeDefined();
}, 60_000);

test("beats that never follow what the node holds are asked about once a heartbeat at most; the member stays", async () => {
  const m = await beatingMember();
  const t0 = performance.now();
  for (let i = 0; i < 300; i++) await m.send({ v, type: "beat", seq: m.mine.seq + 1_000 + i });
  await waitFor(() => (m.heardTypes.get("want") ?? 0) > 0, { what: "the node to ask for the whole announcement" });
  const wants = m.heardTypes.get("want") ?? 0;
  expect(wants).toBeLessThanOrEqual(1 + Math.ceil((performance.now() - t0) / HEARTBEAT_MS));
  expect(await listed(m.mine.nodeId)).toBeDefined();
}, 60_000);

test("a patch that follows changes what the node holds of the member; one that does not is asked about", async () => {
  const m = await beatingMember();
  const id = m.mine.nodeId;
  await m.send({ v, type: "patch", base: m.mine.seq, seq: m.mine.seq + 1, set: { vramBytes: 123_456_789 }, unset: [] });
  await waitFor(async () => (await listed(id))?.vramBytes === 123_456_789, { what: "the node to take the patch" });
  // Based on an announcement the node never had: not applied, and the node asks for the whole one.
  await m.send({ v, type: "patch", base: m.mine.seq + 50, seq: m.mine.seq + 51, set: { vramBytes: 1 }, unset: [] });
  await waitFor(() => (m.heardTypes.get("want") ?? 0) > 0, { what: "the node to ask for the whole announcement" });
  expect((await listed(id))?.vramBytes).toBe(123_456_789);
}, 60_000);

const junk: [string, Record<string, unknown>, string[]][] = [
  ["a field of the wrong shape", { vramBytes: "lots" }, []],
  ["who the node is", { nodeId: "f".repeat(64) }, []],
  ["a field no node knows", { secretKey: "x" }, []],
  ["a required field taken away", {}, ["role"]],
];
test.each(junk)("a patch of junk (%s) drops that member alone", async (_what, set, unset) => {
  const m = await beatingMember();
  await m.send({ v, type: "patch", base: m.mine.seq, seq: m.mine.seq + 1, set, unset });
  expect(await droppedForJunk(m)).toMatch(/sent junk|invalid|patch|control message/i);
}, 60_000);
