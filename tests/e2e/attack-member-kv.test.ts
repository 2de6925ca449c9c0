/**
 * The KV stream (issue 30) from a member built from our own modules, against a real node holding a
 * real conversation in its real llama-server: a member gets nothing for a model it does not announce
 * serving, nothing for a prompt whose tokens it cannot show (the claim alone opens no conversation),
 * one stream at a time, and junk on the stream costs that stream only.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { post } from "../../harness/api.ts";
import { killAllChildren } from "../../harness/children.ts";
import { startMeshNode, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { RoguePeer, type RogueMembership } from "../../harness/rogue-peer.ts";
import { identityKnown, savedSlots, unloadAll } from "../../harness/slot-files.ts";
import { waitFor, withDeadline } from "../../harness/wait.ts";
import { decodeJoinToken } from "../../mesh/join-token.ts";
import { encodeFrame, readFrame, StreamKind } from "../../streams/wire.ts";

const MODEL = "tiny-q8_0";
let node: MeshTestNode;
let rogue: RoguePeer;
let member: RogueMembership;
let identity: string;
beforeAll(async () => {
  [node, rogue] = await Promise.all([startMeshNode([...SMALL_LLAMA, "--model", await testModel("tiny", "q8_0")]), RoguePeer.start()]);
  identity = await identityKnown(node, MODEL);
  // Loaded again once its content is known: its server keeps slots.
  await unloadAll(node);
  member = await rogue.member(decodeJoinToken(node.token));
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

/** One KV exchange: the ask as the member writes it, and the node's answer (or how the stream ended). */
async function ask(body: Uint8Array | object): Promise<unknown> {
  const stream = await member.openStream(StreamKind.KV);
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

test("a member that does not announce serving the model gets a miss, whatever it asks", async () => {
  expect(await ask({ identity, build: build(), chain: chain(4) })).toEqual({ miss: "you do not announce a model of that content" });
});

test("a member of another llama.cpp build gets a miss", async () => {
  expect(await ask({ identity, build: "b1", chain: chain(4) })).toEqual({ miss: "another llama.cpp build: its KV is not this node's" });
});

test("junk on the KV stream ends that stream; the node answers the next and its clients", async () => {
  const answer = await ask(Uint8Array.from([0, 0, 0, 5, 1, 2, 3, 4, 5]));
  expect(answer).toMatchObject({ reset: expect.any(String) });
  expect(await ask({ identity, build: build(), chain: ["not a hash"] })).toEqual({ miss: "the ask is not one this node reads" });
  expect((await fetch(`${node.url}/health`)).status).toBe(200);
});

test("one KV stream per member at a time: a second while the first is open is told the node is busy", async () => {
  const open = await member.openStream(StreamKind.KV);
  try {
    expect(await ask({ identity, build: build(), chain: chain(4) })).toEqual({ miss: expect.stringMatching(/^busy/) });
  } finally {
    await open.send.reset(0).catch(() => undefined);
  }
});

test("a member that claims to serve the model, without the prompt's tokens, gets nothing of the node's conversation", async () => {
  // It announces the node's own entry for the model as its own, and serving it.
  const entry = member.announcement!.modelsOnDisk.find((m) => m.name === MODEL)!;
  member.mine.modelsOnDisk = [entry];
  member.mine.serving = [MODEL];
  await waitFor(async () => ((await (await fetch(`${node.url}/api/status`)).json()) as { peers: { serving: string[] }[] }).peers.some((p) => p.serving.includes(MODEL)), {
    what: "the node to hear the member's claim",
  });
  const answer = await ask({ identity, build: build(), chain: chain(8) });
  expect(answer).toEqual({ miss: "no saved conversation here shares 128 tokens with that prompt" });
  // The node did look: its server's conversation was saved to answer (and stays on its disk only).
  expect(savedSlots(node).length).toBe(1);
});
