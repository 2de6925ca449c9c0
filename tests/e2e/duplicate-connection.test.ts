/**
 * Two members that dial each other at once keep one connection and close the other. The side that
 * closes it can be ahead: here the duplicate's close arrives before the connection kept has finished
 * its handshake. That member has not left, so the node must not drop it even for a moment. When one
 * node dropped it, every node worked out another catalog: the model of a group of three looked
 * short of memory on the node that lost two members at once, and its clients got 503s. A real node;
 * the member is built from our own modules, so it can hold its hello; loopback only.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { decodeJoinToken, type JoinToken } from "../../mesh/join-token.ts";
import { CloseCode } from "../../mesh/membership.ts";
import { shortId } from "../../mesh/status.ts";
import { killAllChildren } from "../../harness/children.ts";
import { peerIds, startMeshNode, type MeshTestNode } from "../../harness/mesh.ts";
import { RoguePeer } from "../../harness/rogue-peer.ts";
import { waitFor } from "../../harness/wait.ts";

let node: MeshTestNode;
let token: JoinToken;
const rogues: RoguePeer[] = [];
beforeAll(async () => {
  node = await startMeshNode();
  token = decodeJoinToken(node.token);
});
afterAll(async () => {
  await Promise.all([node?.stop(), ...rogues.map((r) => r.close())]);
  await killAllChildren();
});

async function joined() {
  const rogue = await RoguePeer.start();
  rogues.push(rogue);
  const member = await rogue.member(token);
  await waitFor(async () => (await peerIds(node)).includes(rogue.transport.nodeId), { what: "the node to admit the member" });
  const lines = (what: string) => node.child.output().split("\n").filter((l) => l.includes(what) && l.includes(`peer=${shortId(rogue.transport.nodeId)}`));
  return { rogue, member, lines };
}

test("a member whose connection closes as a duplicate before the one kept is admitted stays a member throughout", async () => {
  const { rogue, member, lines } = await joined();
  const second = await rogue.heldConnection(token, member);
  member.close(CloseCode.DUPLICATE, "duplicate connection");
  // The node has seen the close once it says what it does about it: keeps the member (or, before
  // the fix, drops it). Only then does the kept connection's hello go.
  await waitFor(() => lines("peer left").length + lines("closed as a duplicate").length > 0, { what: "the node to see the duplicate's close" });
  const kept = await second.hello();
  try {
    expect(lines("peer left")).toEqual([]);
    expect(lines("peer joined")).toHaveLength(1);
    expect(await peerIds(node)).toContain(rogue.transport.nodeId);
    // The node talks to it on the connection kept: its heartbeat arrives there.
    const heard = kept.heard;
    await waitFor(() => kept.heard > heard, { what: "the node's heartbeat on the connection kept" });
    expect(lines("peer left")).toEqual([]);
  } finally {
    kept.close();
  }
});

test("a duplicate's close with no connection behind it: the member is dropped once the wait for one is over", async () => {
  const { rogue, member, lines } = await joined();
  member.close(CloseCode.DUPLICATE, "duplicate connection");
  await waitFor(() => lines("peer left").length > 0, { what: "the node to drop the member", timeoutMs: 30_000 });
  expect(await peerIds(node)).not.toContain(rogue.transport.nodeId);
});
