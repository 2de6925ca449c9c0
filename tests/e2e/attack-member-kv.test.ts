/**
 * The KV stream (issue 30) from a member built from our own modules, against a real node holding a
 * real conversation in its real llama-server: a member gets nothing for a model it does not announce
 * serving, nothing for a prompt whose tokens it cannot show (the claim alone opens no conversation),
 * one stream at a time, and junk on the stream costs that stream only. Each over the mesh connection
 * and over the node's direct path (TLS), which answers a KV connection as a KV stream.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { post } from "../../harness/api.ts";
import { killAllChildren } from "../../harness/children.ts";
import { startMeshNode, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { rogueHttp } from "../../harness/rogue-http.ts";
import { RoguePeer, type RogueMembership } from "../../harness/rogue-peer.ts";
import { identityKnown, savedSlots, unloadAll } from "../../harness/slot-files.ts";
import { waitFor, withDeadline } from "../../harness/wait.ts";
import { decodeJoinToken, type JoinToken } from "../../mesh/join-token.ts";
import type { Stream } from "../../streams/stream.ts";
import { MAX_BLOCKS } from "../../kv/prefix-chain.ts";
import { encodeFrame, readFrame, StreamKind } from "../../streams/wire.ts";
import { connectDirect } from "../../tunnel/direct.ts";
import { socketStream } from "../../tunnel/socket-stream.ts";
import { KV_FROM_HEADER } from "../../mesh/mesh-headers.ts";

const MODEL = "tiny-q8_0";
let node: MeshTestNode;
let rogue: RoguePeer;
let member: RogueMembership;
let identity: string;
let token: JoinToken;
beforeAll(async () => {
  [node, rogue] = await Promise.all([startMeshNode([...SMALL_LLAMA, "--model", await testModel("tiny", "q8_0")]), RoguePeer.start()]);
  identity = await identityKnown(node, MODEL);
  // Loaded again once its content is known: its server keeps slots.
  await unloadAll(node, MODEL);
  token = decodeJoinToken(node.token);
  member = await rogue.member(token);
  member.recordStreams();
  // A conversation the node's client had: in its server's slot, not on disk yet.
  const prompt = Array.from({ length: 60 }, (_, i) => ["river", "stone", "cloud", "harbor"][i % 4]).join(" ");
  const res = await post(node, "/v1/completions", { model: MODEL, prompt, max_tokens: 1 });
  expect(res.status).toBe(200);
  await res.arrayBuffer();
}, 120_000);
afterAll(async () => {
  member?.close();
  await Promise.all([node?.stop(), rogue?.close()]);
  await killAllChildren();
});

type Path = "mesh" | "direct";
const PATHS: Path[] = ["mesh", "direct"];

/** A KV stream to the node: over the mesh connection, or a KV connection on its direct path. */
async function kvStream(path: Path): Promise<Stream> {
  if (path === "mesh") return member.openStream(StreamKind.KV);
  const offer = await waitFor(() => member.announcement?.signedDirect, { what: "the node to announce its direct path" });
  return socketStream(await connectDirect({ host: "127.0.0.1", port: offer.port, certSha256: offer.certSha256 }, rogue.transport.nodeId, node.nodeId, token.secret, rogue.sign, "kv"));
}

/** One KV exchange: the ask as the member writes it, and the node's answer (or how the stream ended). */
async function ask(body: Uint8Array | object, path: Path = "mesh"): Promise<unknown> {
  const stream = await kvStream(path);
  await stream.send.writeAll(body instanceof Uint8Array ? body : encodeFrame(body));
  await stream.send.finish();
  return withDeadline(
    readFrame(stream.recv).catch((err: unknown) => ({ reset: (err as Error).message })),
    30_000,
    "the node's KV answer",
  );
}

const build = () => member.announcement!.llamaBuild;
const chain = (n: number) => Array.from({ length: n }, (_, i) => i.toString(16).padStart(32, "0"));

test.each(PATHS)("a member that does not announce serving the model gets a miss, whatever it asks (%s)", async (path) => {
  expect(await ask({ identity, build: build(), chain: chain(4) }, path)).toEqual({ miss: "you do not announce a model of that content" });
});

test.each(PATHS)("a member of another llama.cpp build gets a miss (%s)", async (path) => {
  expect(await ask({ identity, build: "b1", chain: chain(4) }, path)).toEqual({ miss: "another llama.cpp build: its KV is not this node's" });
});

test.each(PATHS)("junk on the KV stream ends that stream; the node answers the next and its clients (%s)", async (path) => {
  // Ended without an answer: a reset on the mesh, a closed socket (no frame) on the direct path.
  const answer = await ask(Uint8Array.from([0, 0, 0, 5, 1, 2, 3, 4, 5]), path);
  expect(answer === null || typeof (answer as { reset?: unknown }).reset === "string").toBe(true);
  expect(await ask({ identity, build: build(), chain: ["not a hash"] }, path)).toEqual({ miss: "the ask is not one this node reads" });
  expect((await fetch(`${node.url}/health`)).status).toBe(200);
});

test.each(PATHS)("an ask claiming 4 GiB, or a chain past the most blocks, is refused without the node buffering it; the next is answered (%s)", async (path) => {
  const oversized = await ask(Uint8Array.from([0xff, 0xff, 0xff, 0xff, 1, 2, 3]), path);
  expect(oversized === null || typeof (oversized as { reset?: unknown }).reset === "string").toBe(true);
  expect(await ask({ identity, build: build(), chain: chain(MAX_BLOCKS + 1) }, path)).toEqual({ miss: "the ask is not one this node reads" });
  expect(await ask({ identity, build: build(), chain: chain(4) }, path)).toEqual({ miss: "you do not announce a model of that content" });
});

test.each([
  ["mesh", "mesh"],
  ["mesh", "direct"],
  ["direct", "mesh"],
] as const)("one KV stream per member at a time, whatever the path: a second (%s, then %s) while the first is open is told the node is busy", async (first, second) => {
  const busy = async (path: Path) => ((await ask({ identity, build: build(), chain: chain(4) }, path)) as { miss?: string }).miss?.startsWith("busy") === true;
  // The test before reset its first stream: the node may not have seen the reset yet (then this first would be the one told busy).
  await waitFor(async () => !(await busy(second)), { what: "the node to hold no KV stream of the member" });
  // The node waits KV_ASK_MS (5 s) for the first's ask and then lets it go: on a loaded machine that
  // window can pass before a second gets there, so each try holds a fresh first stream.
  const heldOff = async () => {
    const open = await kvStream(first);
    // The start of an ask, so the stream is surely at the node (it then waits up to KV_ASK_MS for the rest).
    await open.send.writeAll(Uint8Array.of(0, 0, 1));
    try {
      // The node counts the first once it has read its kind (mesh) or taken the connection (direct).
      return await waitFor(() => busy(second), { what: "the second stream to be told the node is busy", timeoutMs: 4_000 }).then(
        () => true,
        () => false,
      );
    } finally {
      await open.send.reset(0).catch(() => undefined);
    }
  };
  await waitFor(heldOff, { what: "a second stream to be told the node is busy while a first is open", timeoutMs: 60_000 });
});

/** A completion the member forwards, naming itself as the node that holds the conversation's KV. */
async function namingItself(): Promise<number> {
  const prompt = Array.from({ length: 40 }, (_, i) => ["harbor", "lantern", "delta", "gamma"][i % 4]).join(" ");
  const answer = await rogueHttp(member, { method: "POST", path: "/v1/completions", headers: { [KV_FROM_HEADER]: rogue.transport.nodeId }, body: JSON.stringify({ model: MODEL, prompt, max_tokens: 1 }) });
  return "status" in answer ? answer.status : 0;
}
const kvStreamsToMember = () => member.streamsFromNode.filter((k) => k === StreamKind.KV).length;

test("a member's forwarded request that names itself as the KV holder is answered, and the node asks it nothing: it has not served the model", async () => {
  expect(await namingItself()).toBe(200);
  expect(kvStreamsToMember()).toBe(0);
});

test("a member that claims to serve the model, without the prompt's tokens, gets nothing of the node's conversation", async () => {
  // It announces the node's own entry for the model as its own, and serving it.
  const entry = member.announcement!.modelsOnDisk.find((m) => m.name === MODEL)!;
  member.mine.modelsOnDisk = [entry];
  member.mine.serving = [MODEL];
  await waitFor(async () => ((await (await fetch(`${node.url}/api/status`)).json()) as { peers: { serving: string[] }[] }).peers.some((p) => p.serving.includes(MODEL)), {
    what: "the node to hear the member's claim",
  });
  for (const path of PATHS) expect(await ask({ identity, build: build(), chain: chain(8) }, path)).toEqual({ miss: "no saved conversation here of 128 tokens or more is wholly within that prompt" });
  // Its ask made the node save nothing of the conversation its server holds (issue 43: an ask saved it to answer).
  expect(savedSlots(node)).toEqual([]);
});

test("once the member announces serving the model, a request naming it is asked of it, as the node's routes would send it prompts (--hosts bounds both)", async () => {
  // The claim made in the test before: the member serves the model's content.
  expect(member.mine.serving).toEqual([MODEL]);
  expect(await namingItself()).toBe(200);
  await waitFor(() => kvStreamsToMember() === 1, { what: "the node to ask the member for the KV" });
});
