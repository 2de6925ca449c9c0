/**
 * Issue 27, addresses chosen by a member: a member passes on a "member" whose relay is a host of
 * its choosing (here a loopback HTTP server standing in for any address), so that the node would
 * open connections there. The node runs the mesh's own relay (`--relay URL`, iroh1), so relays are
 * on; it dials only relays it would use itself. A real node, a member built from our own modules;
 * loopback only.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { decodeJoinToken } from "../../mesh/join-token.ts";
import { nodeIdOf } from "../../mesh/transport.ts";
import { freePort } from "../../pool/free-port.ts";
import { killAllChildren } from "../../harness/children.ts";
import { meshReady, type MeshTestNode } from "../../harness/mesh.ts";
import { startNode } from "../../harness/node.ts";
import { RoguePeer, type RogueMembership } from "../../harness/rogue-peer.ts";
import { waitFor } from "../../harness/wait.ts";

let node: MeshTestNode;
let rogue: RoguePeer;
let member: RogueMembership;
const hits: string[] = [];
const trap = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch(req) {
    hits.push(`${req.method} ${new URL(req.url).pathname}`);
    return new Response("no", { status: 404 });
  },
});

beforeAll(async () => {
  // The mesh's own relay: a port where nothing listens (no relay server runs here), as in relays.test.ts.
  node = await meshReady(await startNode(["--transport", "iroh1"], { relay: [`http://127.0.0.1:${freePort()}`], ownLine: true }));
  rogue = await RoguePeer.start("iroh1");
  member = await rogue.member(decodeJoinToken(node.token));
});
afterAll(async () => {
  member?.close();
  await Promise.all([node?.stop(), rogue?.close()]);
  trap.stop(true);
  await killAllChildren();
});

test("a relay URL a member names for another member is not dialed unless it is one of the node's own", async () => {
  const stranger = nodeIdOf(Uint8Array.from(randomBytes(32)));
  await member.sendMembers([{ nodeId: stranger, addresses: [], relayUrl: `http://127.0.0.1:${trap.port}/` }]);
  // The node tries the member it was told of, by what it may use of its address (nothing here), and gives up.
  await waitFor(() => new RegExp(`could not reach a member[^\\n]*${stranger.slice(0, 10)}`).test(node.child.output()), { what: "the node to give up on the named member", timeoutMs: 60_000 });
  expect(hits).toEqual([]);
  expect((await fetch(`${node.url}/health`)).status).toBe(200);
});
