/**
 * Issue 43, as an attacker plays it against a real node and its real llama-server, with a member
 * built from our own modules (`harness/rogue-kv.ts`), in a mesh without a roster (every member's
 * word counts) where the operator's `--hosts` names the member, so the node does take its caches:
 * - forged values: a real cache of the node's own conversation with every K/V value's sign flipped
 *   (tokens, sizes and layout right) serves the one request that fetched it and nothing after: it
 *   is never kept, offered or restored again, and the node's own client's answer is unchanged; the
 *   member's claimed reading rate inflates nothing;
 * - eviction by a fake file: a cache with a made-up layer is refused before a byte of it is
 *   written, one of another shape after it is received: the client's saved conversation stays;
 * - the prefix oracle: a guess that shares part of a saved conversation gets the miss a wrong guess
 *   gets, word for word; asks past a member's rate are refused.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname } from "node:path";
import { post } from "../../harness/api.ts";
import { killAllChildren } from "../../harness/children.ts";
import { meshStatus, startMeshNode, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA, TEST_LINE } from "../../harness/node.ts";
import { parseScrape, valueOf } from "../../harness/prometheus.ts";
import { rogueHttp } from "../../harness/rogue-http.ts";
import { cutSlot, serveRogueKv, signsFlipped, slotShape, type RogueKvAnswer, type RogueKvExchange } from "../../harness/rogue-kv.ts";
import { RoguePeer, type RogueMembership } from "../../harness/rogue-peer.ts";
import { slotFile } from "../../harness/slot-file-fixture.ts";
import { identityKnown, keepsSlots, savedSlots, unloadAll } from "../../harness/slot-files.ts";
import { waitFor, withDeadline } from "../../harness/wait.ts";
import { KV_ASK_REFILL_MS, KV_ASKS_BURST } from "../../kv/kv-holder.ts";
import { BLOCK_TOKENS, chainOf } from "../../kv/prefix-chain.ts";
import { decodeJoinToken } from "../../mesh/join-token.ts";
import { MESH_LINE_FILE } from "../../mesh/mesh-line.ts";
import { readFrame, StreamKind, writeFrame } from "../../streams/wire.ts";
import { KV_FROM_HEADER } from "../../mesh/mesh-headers.ts";

const MODEL = "wide-q8_0";
const WORDS = ["river", "stone", "cloud", "harbor", "lantern", "delta", "gamma", "meadow"];
/** Another client's conversation, with a secret in its first block. */
const PROMPT = `The door code is 4821. ${Array.from({ length: 90 }, (_, i) => WORDS[(i * 5) % WORDS.length]).join(" ")}`;

let node: MeshTestNode;
let rogue: RoguePeer;
let member: RogueMembership;
let identity: string;
/** How the rogue answers the node's next KV asks, and what each came to. */
let answer: (ask: { chain: string[] }) => RogueKvAnswer = () => ({ miss: "nothing yet" });
const exchanges: RogueKvExchange[] = [];

beforeAll(async () => {
  rogue = await RoguePeer.start();
  // A state dir that belongs to a mesh already and holds no roster: every member's word counts, as before rosters.
  const unanchored = { "mesh.secret": `${randomBytes(32).toString("hex")}\n`, [MESH_LINE_FILE]: `${JSON.stringify({ line: TEST_LINE })}\n` };
  const file = await testModel("wide", "q8_0");
  node = await startMeshNode([...SMALL_LLAMA, "--model", MODEL, "--hosts", rogue.transport.nodeId], { models: { [`${MODEL}.gguf`]: file }, stateFiles: unanchored });
  identity = await identityKnown(node, MODEL);
  await keepsSlots(node, MODEL, identity);
  member = await rogue.member(decodeJoinToken(node.token));
  member.recordStreams(undefined, async (stream) => exchanges.push(await serveRogueKv(stream, (ask) => answer(ask))));
}, 180_000);
afterAll(async () => {
  member?.close();
  await Promise.all([node?.stop(), rogue?.close()]);
  await killAllChildren();
});

async function complete(prompt: string, maxTokens = 8): Promise<string> {
  const res = await post(node, "/v1/completions", { model: MODEL, prompt, max_tokens: maxTokens, temperature: 0 });
  const body = (await res.json()) as { choices?: { text: string }[] };
  if (res.status !== 200 || !body.choices) throw new Error(`completion: ${res.status} ${JSON.stringify(body)}`);
  return body.choices[0]!.text;
}

/** The member's request, forwarded to the node, naming itself as the conversation's last server. */
async function rogueComplete(prompt: string): Promise<string> {
  const a = await rogueHttp(member, { method: "POST", path: "/v1/completions", headers: { [KV_FROM_HEADER]: rogue.transport.nodeId }, body: JSON.stringify({ model: MODEL, prompt, max_tokens: 8, temperature: 0 }) });
  if (!("status" in a) || a.status !== 200) throw new Error(`the member's request: ${JSON.stringify(a)}`);
  return (JSON.parse(a.body) as { choices: { text: string }[] }).choices[0]!.text;
}

const follow = async (event: string) => valueOf(parseScrape(await (await fetch(`${node.url}/metrics`)).text()), "mesh_kv_follow_total", { event });
const savedSeconds = async () => valueOf(parseScrape(await (await fetch(`${node.url}/metrics`)).text()), "mesh_kv_follow_saved_seconds_total");
const sha = (path: string) => new Bun.CryptoHasher("sha256").update(readFileSync(path)).digest("hex");
/** The node's saved slots, by path and content. */
const saved = () => new Map(savedSlots(node).map((p) => [p, sha(p)]));
/** Files in a saved slot's folder that are not saved slots or their sums: a fetch's leftovers. */
const leftovers = (slotDir: string) => readdirSync(slotDir).filter((f) => !f.endsWith(".bin") && !f.endsWith(".bin.sum"));

/** The member claims to serve the node's model (its content), as a server of it would announce. */
async function claimServing(on: boolean): Promise<void> {
  const entry = member.announcement!.modelsOnDisk.find((m) => m.name === MODEL)!;
  Object.assign(member.mine, on ? { modelsOnDisk: [entry], serving: [MODEL] } : { serving: [] });
  await waitFor(async () => (await meshStatus(node)).peers.some((p) => p.serving.includes(MODEL)) === on, { what: `the node to hear the member ${on ? "serve" : "no longer serve"} ${MODEL}` });
}

/** The client's saved conversation of PROMPT (the newest saved slot after an unload), its bytes and shape. */
let victim: { path: string; bytes: Uint8Array; shape: ReturnType<typeof slotShape> };
/** Whole blocks of PROMPT a follow-up shares for sure (its last tokens may join the next words). */
let shared: number;

test("a forged cache (every value's sign flipped) serves only the request that fetched it: not kept, not offered, and the node's own client answers as before", async () => {
  const followUp = `${PROMPT} harbor stone`;
  const own = await complete(followUp);
  await complete(PROMPT, 1);
  await unloadAll(node);
  const newest = savedSlots(node).sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)[0]!;
  victim = { path: newest, bytes: new Uint8Array(readFileSync(newest)), shape: slotShape(new Uint8Array(readFileSync(newest))) };
  shared = Math.floor((victim.shape.tokens.length - 4) / BLOCK_TOKENS) * BLOCK_TOKENS;
  expect(shared).toBeGreaterThanOrEqual(2 * BLOCK_TOKENS);
  const before = saved();

  const forged = signsFlipped(cutSlot(victim.bytes, shared));
  // It claims to read prompts at 0.001 tokens a second: on the node's word, its cache would save days.
  answer = () => ({ offer: { tokens: shared, prefillTps: 0.001 }, file: forged });
  // It served the model lately (the node takes KV only from such a member), and serves it no more (the node's clients stay on the node).
  await claimServing(true);
  await claimServing(false);
  const hits = await follow("hit");
  const rogueTurn = `${PROMPT} lantern delta`;
  const asked = exchanges.length;
  const turn = rogueComplete(rogueTurn);
  // The node's own client asks while the member's turn is under way: its prompt shares the prefix,
  // and llama-server would give it the slot holding the member's cache once that slot is idle.
  await waitFor(() => exchanges.length > asked && exchanges.at(-1)?.go === true, { what: "the node to take the member's cache" });
  const meanwhile = complete(followUp);
  const forgedAnswer = await turn;
  expect(await meanwhile).toBe(own);
  expect(exchanges.at(-1)?.go).toBe(true);
  expect(await follow("hit")).toBe(hits + 1);
  // Its own request was read from its cache (what it had a say in anyway); the same turn read by the node is another answer.
  console.log(`the member's turn on its forged cache: ${JSON.stringify(forgedAnswer)}; the node's client, before and after: ${JSON.stringify(own)}`);
  // Saved no more than the node's own measured reading could: the member's claimed rate counts for
  // nothing (on its word this cache saved 191.9 s in the issue, and would save days now). The node's
  // own rate falls under a loaded machine (a clean-clone CI measured 5.5 s): far below either.
  expect(await savedSeconds()).toBeLessThan(60);

  // Nothing of it stays: not among the saved slots, not left in the slot folder.
  expect(saved()).toEqual(before);
  expect(leftovers(dirname(victim.path))).toEqual([]);
  // The node's own client, sharing the prefix at temperature 0, gets the answer it got before.
  expect(await complete(followUp)).toBe(own);
  await unloadAll(node);
  for (const path of savedSlots(node)) expect(slotShape(new Uint8Array(readFileSync(path))).tokens.length).not.toBe(shared);
  expect(saved().get(victim.path)).toBe(before.get(victim.path)!);
}, 180_000);

test("a fake cache with a made-up layer is refused before a byte is written, one of another shape after it is received: the client's saved conversation stays", async () => {
  const { layers, kRowBytes, tokens } = victim.shape;
  const before = saved();
  const failed = await follow("failed");
  const turn = `${PROMPT} meadow river`;
  // The right tokens, one layer more than the model has, rows four times as wide as f32 ones: more than the model's KV of them can take.
  const huge = slotFile(shared, { streams: 2, layers: layers + 1, row: kRowBytes * 8, token: (i) => tokens[i]! });
  // It claims a slow reading again: were that believed, no file would be too big to be worth fetching.
  answer = () => ({ offer: { tokens: shared, prefillTps: 0.001 }, file: huge });
  const n = exchanges.length;
  await rogueComplete(turn);
  await waitFor(() => exchanges.length === n + 1, { what: "the node's KV stream to the member to end" });
  expect(await follow("failed")).toBe(failed + 1);
  expect(exchanges.at(-1)!.go).toBeUndefined();
  expect(exchanges.at(-1)!.sent).toBe(0);

  // Within the size a cache of so many tokens can take, but not the model's shape: received, never restored.
  const misshapen = slotFile(shared, { streams: 2, layers, row: kRowBytes + 2, token: (i) => tokens[i]! });
  answer = () => ({ offer: { tokens: shared }, file: misshapen });
  await rogueComplete(turn);
  await waitFor(() => exchanges.length === n + 2, { what: "the node's second KV stream to the member to end" });
  expect(exchanges.at(-1)!.go).toBe(true);
  expect(await follow("failed")).toBe(failed + 2);

  await unloadAll(node);
  expect(saved().get(victim.path)).toBe(before.get(victim.path)!);
  expect(leftovers(dirname(victim.path))).toEqual([]);
}, 180_000);

/** One KV ask of the member's, over the mesh connection: the node's answer. */
async function ask(chain: string[]): Promise<{ offer?: { tokens: number }; miss?: string }> {
  const stream = await member.openStream(StreamKind.KV);
  await writeFrame(stream.send, { identity, build: member.announcement!.llamaBuild, chain });
  const answer = (await withDeadline(readFrame(stream.recv), 30_000, "the node's KV answer")) as { offer?: { tokens: number }; miss?: string };
  // Never a go: it wants to know, not to take.
  if (answer.offer) await writeFrame(stream.send, { go: false });
  await stream.send.finish();
  return answer;
}

test("no prefix oracle: a guess sharing part of the client's conversation gets the miss a wrong guess gets; asks past a member's rate are refused", async () => {
  await claimServing(true);
  const tokens = victim.shape.tokens;
  const whole = Math.floor(tokens.length / BLOCK_TOKENS) - 1;
  expect(whole).toBeGreaterThanOrEqual(3);
  // The right guess of the secret, and a wrong one (a token of the first block changed), each as far as two blocks.
  const wrong = tokens.slice();
  wrong[6] = wrong[6]! + 1;
  const right = await ask(chainOf(tokens.subarray(0, 2 * BLOCK_TOKENS)));
  const guessed = await ask(chainOf(wrong.subarray(0, 2 * BLOCK_TOKENS)));
  expect(right.offer).toBeUndefined();
  expect(right).toEqual(guessed);
  // All its whole blocks but one: the same miss; all of them: the offer (the conversation is there to be found).
  expect(await ask(chainOf(tokens.subarray(0, (whole - 1) * BLOCK_TOKENS)))).toEqual(guessed);
  expect((await ask(chainOf(tokens.subarray(0, whole * BLOCK_TOKENS)))).offer?.tokens).toBe(whole * BLOCK_TOKENS);

  // Asks as fast as one stream at a time allows: past the member's burst, most are refused.
  const started = performance.now();
  let answered = 0;
  let refused = 0;
  for (let i = 0; i < 3 * KV_ASKS_BURST; i++) {
    const a = await ask(chainOf(wrong.subarray(0, 2 * BLOCK_TOKENS)));
    if (a.miss?.startsWith("too many asks")) refused++;
    else answered++;
  }
  const refills = Math.ceil((performance.now() - started) / KV_ASK_REFILL_MS);
  console.log(`${3 * KV_ASKS_BURST} asks in ${Math.round(performance.now() - started)} ms: ${answered} answered, ${refused} refused as too many`);
  expect(refused).toBeGreaterThan(0);
  expect(answered).toBeLessThanOrEqual(KV_ASKS_BURST + refills + 1);
  await claimServing(false);
}, 120_000);
