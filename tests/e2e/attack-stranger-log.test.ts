/**
 * Issue 27, log lines caused by strangers: a stranger without the mesh secret dials a node again and
 * again (each try costs it a handshake; each used to cost the node a log line). A real node, a
 * stranger built from our own transport; loopback only.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { decodeJoinToken, encodeJoinToken } from "../../mesh/join-token.ts";
import { killAllChildren } from "../../harness/children.ts";
import { startMeshNode, type MeshTestNode } from "../../harness/mesh.ts";
import { RoguePeer } from "../../harness/rogue-peer.ts";
import { waitFor } from "../../harness/wait.ts";

const TRIES = 40;
let node: MeshTestNode;
let stranger: RoguePeer;
beforeAll(async () => {
  [node, stranger] = await Promise.all([startMeshNode(), RoguePeer.start()]);
});
afterAll(async () => {
  await Promise.all([node?.stop(), stranger?.close()]);
  await killAllChildren();
});

const refusedLines = () => [...node.child.output().matchAll(/refused a peer that failed authentication[^\n]*/g)].map((m) => m[0]);

test(`${TRIES} handshakes with a wrong secret write a line per 10 s, counting them, and the node still serves`, async () => {
  const forged = encodeJoinToken({ ...decodeJoinToken(node.token), secret: new Uint8Array(32).fill(7) });
  const started = performance.now();
  for (let i = 0; i < TRIES; i++) expect(await stranger.tryJoin(decodeJoinToken(forged))).toBeNull();
  const seconds = (performance.now() - started) / 1000;
  await waitFor(() => refusedLines().length > 0, { what: "the node to log the refusals" });
  const lines = refusedLines();
  console.log(`${TRIES} refused handshakes in ${seconds.toFixed(1)} s: ${lines.length} log lines`);
  expect(lines.length).toBeLessThanOrEqual(Math.ceil(seconds / 10) + 1);
  expect(lines[0]).toContain("count=1");
  expect((await fetch(`${node.url}/health`)).status).toBe(200);
});
