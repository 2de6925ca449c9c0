/**
 * A member and Ollama's `/api/ps`: a node shows when another node's model unloads as that node
 * says in its own `/api/ps` (the one route of Ollama's open to members), asked when a client asks.
 * A member built from our modules claims to serve the node's model and answers that ask as it
 * likes: never, with junk, past the bound, naming another server, or with a date. The node's
 * client always gets its list within the ask's deadline; a claim is shown, never acted on; and a
 * member's own ask is answered from what the node has here, making it ask no one in turn.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { killAllChildren } from "../../harness/children.ts";
import { meshStatus, startMeshNode, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA, TEST_LINE } from "../../harness/node.ts";
import { rogueHttp, serveRogueHttp, type RogueReply } from "../../harness/rogue-http.ts";
import { RoguePeer, type RogueMembership } from "../../harness/rogue-peer.ts";
import { waitFor } from "../../harness/wait.ts";
import { decodeJoinToken } from "../../mesh/join-token.ts";
import { MESH_LINE_FILE } from "../../mesh/mesh-line.ts";
import { PEER_LOADED_MS } from "../../router/serving/serving.ts";
import { StreamKind } from "../../streams/wire.ts";

/** The node's own model, and the one the member alone claims to serve (its entry, renamed). */
const OWN = "tiny-q8_0";
const MODEL = "phantom-q8_0";
const NEVER_YEAR = 2318;

let node: MeshTestNode;
let rogue: RoguePeer;
let member: RogueMembership;
/** How the member answers the node's next ask, and the asks it got. */
let reply: (head: { method: string; path: string }) => RogueReply = () => "silence";
const asked: { method: string; path: string }[] = [];

beforeAll(async () => {
  rogue = await RoguePeer.start();
  // A state dir that belongs to a mesh already and holds no roster, and `--hosts` naming the member: its serving counts here.
  const unanchored = { "mesh.secret": `${randomBytes(32).toString("hex")}\n`, [MESH_LINE_FILE]: `${JSON.stringify({ line: TEST_LINE })}\n` };
  node = await startMeshNode([...SMALL_LLAMA, "--hosts", rogue.transport.nodeId], { models: { [`${OWN}.gguf`]: await testModel("tiny", "q8_0") }, stateFiles: unanchored });
  member = await rogue.member(decodeJoinToken(node.token));
  member.recordStreams(undefined, undefined, async (stream) => {
    const head = await serveRogueHttp(stream, (h) => reply(h));
    if (head) asked.push(head);
  });
  await waitFor(() => member.announcement?.modelsOnDisk.some((m) => m.name === OWN) === true, { what: "the member to hear the node's model" });
  const entry = member.announcement!.modelsOnDisk.find((m) => m.name === OWN)!;
  Object.assign(member.mine, { modelsOnDisk: [{ ...entry, name: MODEL }], serving: [MODEL] });
  await waitFor(async () => (await meshStatus(node)).peers.some((p) => p.serving.includes(MODEL)), { what: "the node to hear the member serve the model" });
}, 120_000);
afterAll(async () => {
  member?.close();
  await Promise.all([node?.stop(), rogue?.close()]);
  await killAllChildren();
});

/** The node's `/api/ps` as its client reads it: the member's model, and how long the answer took. */
async function ps(): Promise<{ ms: number; served_by?: string; expires_at?: string }> {
  const started = performance.now();
  const res = await fetch(`${node.url}/api/ps`);
  expect(res.status).toBe(200);
  const body = (await res.json()) as { models: { name: string; expires_at: string; details: { served_by?: string } }[] };
  const m = body.models.find((e) => e.name === `${MODEL}:latest`);
  return { ms: performance.now() - started, served_by: m?.details.served_by, expires_at: m?.expires_at };
}

const entryOf = (over: Record<string, unknown> = {}) => ({ model: `${MODEL}:latest`, name: `${MODEL}:latest`, expires_at: "2031-02-03T04:05:06Z", details: { served_by: rogue.transport.nodeId }, ...over });
const year = (iso: string | undefined) => new Date(iso ?? 0).getUTCFullYear();

test("a member that never answers: the client's list comes within the ask's deadline, the model shown as never unloading", async () => {
  reply = () => "silence";
  const n = asked.length;
  const got = await ps();
  expect(asked.slice(n).map(({ method, path }) => `${method} ${path}`)).toEqual(["GET /api/ps"]);
  expect(got.served_by).toBe(rogue.transport.nodeId);
  expect(year(got.expires_at)).toBe(NEVER_YEAR);
  // The deadline and no more: a loaded machine adds its own, never another ask's worth.
  expect(got.ms).toBeLessThan(PEER_LOADED_MS * 2 + 1_000);
});

test.each<[string, () => RogueReply]>([
  ["junk", () => ({ status: 200, body: "not json at all" })],
  ["an error status", () => ({ status: 500, body: JSON.stringify({ models: [entryOf()] }) })],
  ["its model named as another node's", () => ({ status: 200, body: JSON.stringify({ models: [entryOf({ details: { served_by: "someone-else" } })] }) })],
  ["a date past Ollama's never", () => ({ status: 200, body: JSON.stringify({ models: [entryOf({ expires_at: "9999-12-31T00:00:00Z" })] }) })],
  ["a list past the bound (a megabyte)", () => ({ status: 200, body: JSON.stringify({ models: [entryOf(), ...Array.from({ length: 8_000 }, (_, i) => entryOf({ model: `padding-${i}`.padEnd(100, "x") }))] }) })],
])("a member's answer of %s: shown as never unloading, and the node's list is whole", async (_, answer) => {
  reply = answer;
  const got = await ps();
  expect(got.served_by).toBe(rogue.transport.nodeId);
  expect(year(got.expires_at)).toBe(NEVER_YEAR);
});

test("a member's date for its own model is shown as it says, a claim acted on in nothing", async () => {
  const loadedHere = async () => ((await (await fetch(`${node.url}/api/v1/health`)).json()) as { all_models_loaded: { model_name: string }[] }).all_models_loaded.map((m) => m.model_name);
  const before = await loadedHere();
  reply = () => ({ status: 200, body: JSON.stringify({ models: [entryOf(), entryOf({ model: `${OWN}:latest`, name: `${OWN}:latest`, expires_at: "2000-01-01T00:00:00Z" })] }) });
  const got = await ps();
  expect(got.expires_at).toBe("2031-02-03T04:05:06.000Z");
  // Its word on this node's own model changes nothing of it: not its listing, not its load.
  const listed = ((await (await fetch(`${node.url}/api/ps`)).json()) as { models: { name: string; expires_at: string }[] }).models;
  expect(year(listed.find((m) => m.name === `${OWN}:latest`)?.expires_at)).not.toBe(2000);
  expect(await loadedHere()).toEqual(before);
});

test("a member's own /api/ps is answered from this node alone: it asks no one in turn; Ollama's other routes stay closed to members", async () => {
  const before = member.streamsFromNode.filter((k) => k === StreamKind.HTTP).length;
  const own = await rogueHttp(member, { method: "GET", path: "/api/ps" });
  expect("status" in own && own.status).toBe(200);
  const listed = JSON.parse((own as { body: string }).body) as { models: { name: string; expires_at: string }[] };
  // The member's own model, as this node knows it: served elsewhere, unloading never (it was not asked).
  expect(year(listed.models.find((m) => m.name === `${MODEL}:latest`)?.expires_at)).toBe(NEVER_YEAR);
  expect(member.streamsFromNode.filter((k) => k === StreamKind.HTTP).length).toBe(before);
  for (const [method, path] of [["GET", "/api/tags"], ["POST", "/api/show"], ["POST", "/api/ps"], ["GET", "/api/ps/x"]] as const) {
    const refused = await rogueHttp(member, { method, path });
    expect("status" in refused && refused.status).toBe(403);
  }
});
