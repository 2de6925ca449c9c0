/**
 * Issue 43, forged KV: a member forwarded a completion naming itself as the conversation's last
 * server (`x-mesh-kv-from`), claimed to serve the node's model with its content, and answered the
 * node's KV ask with a cache of its own making, which then served the node's own clients. A node
 * now follows such a hint only to one of the owner's machines or a node `--hosts` names, never on
 * a member's word: here in a mesh without a roster (every member counts, as before rosters), the
 * member's hint asks it nothing; a real node, the member built from our own modules.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { killAllChildren } from "../../harness/children.ts";
import { meshStatus, startMeshNode, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA, TEST_LINE } from "../../harness/node.ts";
import { MESH_LINE_FILE } from "../../mesh/mesh-line.ts";
import { rogueHttp } from "../../harness/rogue-http.ts";
import { RoguePeer, type RogueMembership } from "../../harness/rogue-peer.ts";
import { identityKnown } from "../../harness/slot-files.ts";
import { waitFor } from "../../harness/wait.ts";
import { decodeJoinToken } from "../../mesh/join-token.ts";
import { StreamKind } from "../../streams/wire.ts";
import { KV_FROM_HEADER } from "../../mesh/mesh-headers.ts";

const MODEL = "tiny-q8_0";
let node: MeshTestNode;
let rogue: RoguePeer;
let member: RogueMembership;
beforeAll(async () => {
  // A state dir that belongs to a mesh already and holds no roster: an unanchored node, as every node was before rosters.
  const unanchored = { "mesh.secret": `${randomBytes(32).toString("hex")}\n`, [MESH_LINE_FILE]: `${JSON.stringify({ line: TEST_LINE })}\n` };
  [node, rogue] = await Promise.all([startMeshNode([...SMALL_LLAMA, "--model", await testModel("tiny", "q8_0")], { stateFiles: unanchored }), RoguePeer.start()]);
  await identityKnown(node, MODEL);
  member = await rogue.member(decodeJoinToken(node.token));
  member.recordStreams();
}, 120_000);
afterAll(async () => {
  member?.close();
  await Promise.all([node?.stop(), rogue?.close()]);
  await killAllChildren();
});

test("a member that serves the model's content and names itself as the conversation's last server is asked nothing", async () => {
  expect((await meshStatus(node)).trust).toEqual({ state: "unanchored" });
  // It claims the node's own entry for the model (its content identity) and to serve it: its word, as every member's counts here.
  const entry = member.announcement!.modelsOnDisk.find((m) => m.name === MODEL)!;
  Object.assign(member.mine, { modelsOnDisk: [entry], serving: [MODEL] });
  await waitFor(async () => (await meshStatus(node)).peers.some((p) => p.serving.includes(MODEL)), { what: "the node to hear the member's claim" });
  const prompt = Array.from({ length: 60 }, (_, i) => ["harbor", "lantern", "delta", "gamma"][i % 4]).join(" ");
  for (let i = 0; i < 2; i++) {
    const answer = await rogueHttp(member, { method: "POST", path: "/v1/completions", headers: { [KV_FROM_HEADER]: rogue.transport.nodeId }, body: JSON.stringify({ model: MODEL, prompt, max_tokens: 1 }) });
    expect("status" in answer && answer.status).toBe(200);
  }
  expect(member.streamsFromNode.filter((k) => k === StreamKind.KV)).toEqual([]);
});
