/**
 * A conversation's KV cache outlives its model's server on the node: the slots llama-server saves
 * when the model unloads are restored when it loads again, and the conversation's next turn reads
 * only what is new (its answer's `timings.cache_n`). Real node, real llama-server, tiny model.
 */
import { afterAll, afterEach, expect, test } from "bun:test";
import { post } from "../../harness/api.ts";
import { killAllChildren } from "../../harness/children.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA, startNode, type TestNode } from "../../harness/node.ts";
import { parseScrape, valueOf } from "../../harness/prometheus.ts";
import { identityKnown, savedSlots, unloadAll } from "../../harness/slot-files.ts";

const nodes: TestNode[] = [];
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
});
afterAll(killAllChildren);

const MODEL = "tiny-q8_0";
const WORDS = ["river", "stone", "cloud", "mesh", "node", "token", "cache", "prefix", "alpha", "delta"];
/** A long prompt of the same words every run (the test model reads a word as a few tokens). */
const PROMPT = Array.from({ length: 60 }, (_, i) => WORDS[(i * 7) % WORDS.length]).join(" ");

interface Timings {
  cache_n: number;
  prompt_n: number;
}

async function complete(node: TestNode, prompt: string): Promise<Timings> {
  const res = await post(node, "/v1/completions", { model: MODEL, prompt, max_tokens: 1, temperature: 0 });
  const body = (await res.json()) as { timings?: Timings };
  if (res.status !== 200 || !body.timings) throw new Error(`completion: ${res.status} ${JSON.stringify(body)}`);
  return body.timings;
}

/** A node serving tiny, once the model's content identity (which keys its saved slots) is known and a server was loaded with it. */
async function nodeWithIdentity(extra: string[] = [], stateDir?: string): Promise<TestNode> {
  const node = await startNode([...SMALL_LLAMA, ...extra, "--model", await testModel("tiny", "q8_0")], stateDir ? { stateDir } : {});
  nodes.push(node);
  await identityKnown(node, MODEL);
  // The server loaded at start may have come before the identity: the next load knows it.
  await unloadAll(node, MODEL);
  return node;
}

test("a conversation's slot saved at unload is restored at the next load: its next turn reads only the new words", async () => {
  const node = await nodeWithIdentity();
  const first = await complete(node, PROMPT);
  expect(first.prompt_n).toBeGreaterThan(100);
  await unloadAll(node);
  expect(savedSlots(node)).toHaveLength(1);

  const next = await complete(node, `${PROMPT} river stone`);
  // Everything the first turn read comes from the restored slot; llama-server reads at least one token again.
  expect(next.cache_n).toBeGreaterThanOrEqual(first.prompt_n - 1);
  expect(next.prompt_n).toBeLessThan(20);

  const scrape = parseScrape(await (await fetch(`${node.url}/metrics`)).text());
  expect(valueOf(scrape, "mesh_kv_slots_total", { event: "saved" })).toBe(1);
  expect(valueOf(scrape, "mesh_kv_slots_total", { event: "restored" })).toBe(1);
  expect(valueOf(scrape, "mesh_kv_slots_total", { event: "failed" })).toBe(0);
  expect(valueOf(scrape, "mesh_kv_slot_bytes_total", { direction: "restored" })).toBeGreaterThan(0);
});

test("--kv-cache-disk 0 keeps nothing: after a reload the whole prompt is read again", async () => {
  const node = await nodeWithIdentity(["--kv-cache-disk", "0"]);
  const first = await complete(node, PROMPT);
  await unloadAll(node);
  expect(savedSlots(node)).toEqual([]);
  const next = await complete(node, `${PROMPT} river stone`);
  expect(next.cache_n).toBe(0);
  expect(next.prompt_n).toBeGreaterThan(first.prompt_n);
});

test("the disk budget holds: a second conversation's slot pushes out the first when both do not fit", async () => {
  const node = await nodeWithIdentity();
  await complete(node, PROMPT);
  await unloadAll(node);
  const [one] = savedSlots(node);
  expect(one).toBeDefined();
  // Room for one slot of this model, not two: the node again, on the same state dir.
  const budget = Math.floor(Bun.file(one!).size * 1.5);
  await node.stop();
  const again = await nodeWithIdentity(["--kv-cache-disk", String(budget)], node.stateDir);
  await complete(again, PROMPT.split(" ").reverse().join(" "));
  await unloadAll(again);
  const left = savedSlots(again);
  expect(left).toHaveLength(1);
  expect(left[0]).not.toBe(one);
});

const DAMAGES: [string, (bytes: Uint8Array) => Uint8Array][] = [
  // What a full disk or a crash mid-write leaves: llama-server aborts on such a state instead of refusing it.
  ["cut short", (bytes) => bytes.subarray(0, Math.floor(bytes.length / 2))],
  ["one byte of its KV changed", (bytes) => (bytes[bytes.length - 100]! ^= 1, bytes)],
];

test.each(DAMAGES)("a saved slot %s on disk is dropped before llama-server reads it; the turn is answered, read whole", async (_, damage) => {
  const node = await nodeWithIdentity();
  const first = await complete(node, PROMPT);
  await unloadAll(node);
  const [file] = savedSlots(node);
  await Bun.write(file!, damage(new Uint8Array(await Bun.file(file!).arrayBuffer())));
  const next = await complete(node, `${PROMPT} river stone`);
  expect(next.cache_n).toBe(0);
  expect(next.prompt_n).toBeGreaterThan(first.prompt_n);
  expect(savedSlots(node)).toEqual([]);
  const scrape = parseScrape(await (await fetch(`${node.url}/metrics`)).text());
  expect(valueOf(scrape, "mesh_kv_slots_total", { event: "failed" })).toBe(1);
});
