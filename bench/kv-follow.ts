#!/usr/bin/env bun
/**
 * What a conversation's KV cache that follows it is worth, on `wide` (`--lengths` tokens of prompt):
 *
 * - Moved: two nodes serve the model (a host, and a replica the host's load brought up). A chat's
 *   first turn is answered by the replica; the replica is unloaded (its slot saved, as a released
 *   one's is) and the next turn, from the same client, goes to the host, which fetches the chat's
 *   KV from the replica's node over the mesh (`kv/`). Time to its first token, against the same turn
 *   read whole (`cache_prompt: false`), whether the host fetched or judged reading faster, and the
 *   bytes it fetched; and the followed turn with one block of the cache checked by reading it
 *   again (the mean cost of a block drawn at random: reading the prompt's first half). `--lab` runs the two nodes in the lab, each link capped at `--mbit`.
 * - Reloaded: one node, the model unloaded after the first turn and loaded again for the next, its
 *   slot restored from disk against read whole.
 *
 * Each table gives the break-even: the shortest prompt of the ladder at which the cache is ahead.
 *
 * Moved turns are medians of `--runs` chats per length, each its own.
 *
 *   bun bench/kv-follow.ts [--lengths 128,256,512,1024,2048,4096] [--runs 3] [--threads 2] [--lab] [--mbit 1000] [--skip-reload]
 */
import { rmSync, statSync } from "node:fs";
import { parseArgs } from "node:util";
import { provideDevLlama } from "../scripts/llama-dev.ts";
import { killAllChildren } from "../harness/children.ts";
import { post } from "../harness/api.ts";
import { burst } from "../harness/burst.ts";
import { meshStatus, waitForFullMesh, type MeshTestNode } from "../harness/mesh.ts";
import { parseScrape, valueOf } from "../harness/prometheus.ts";
import { identityKnown, keepsSlots, savedSlots, unloadAll } from "../harness/slot-files.ts";
import { testModel } from "../harness/models.ts";
import { startNode, type TestNode } from "../harness/node.ts";
import { waitFor } from "../harness/wait.ts";
import { MIN_SAVED_TOKENS } from "../pool/slot-cache.ts";
import { BLOCK_TOKENS } from "../kv/prefix-chain.ts";
import { labOrLoopback, loopbackPlaces, type Places } from "./places.ts";
import { pct, printTable } from "./report.ts";

const { values } = parseArgs({
  options: {
    lengths: { type: "string", default: "128,256,512,1024,2048,4096" },
    threads: { type: "string", default: "2" },
    lab: { type: "boolean", default: false },
    mbit: { type: "string", default: "1000" },
    "skip-reload": { type: "boolean", default: false },
    runs: { type: "string", default: "3" },
  },
});
const LENGTHS = values.lengths.split(",").map(Number);
const RUNS = Number(values.runs);
const MODEL = "wide-q8_0";
const WORDS = ["river", "stone", "cloud", "mesh", "node", "token", "cache", "prefix", "alpha", "delta", "gamma", "beta"];
const LLAMA = ["--ctx-size", "8192", "--llamacpp-args", `--threads ${values.threads} --threads-batch ${values.threads} --parallel 1`, "--rpc-threads", "1"];

process.env.MESH_LLAMA_DIR = (await provideDevLlama()).dir;

/**
 * A prompt of about `tokens` tokens of this model (it reads a word as a few tokens: asked, not
 * guessed), opening with its length and run so no two share a prefix.
 */
async function promptOf(node: TestNode, tokens: number, run = 0): Promise<string> {
  let words = Math.ceil(tokens / 3);
  for (;;) {
    const text = `length ${tokens} run ${run}: ${Array.from({ length: words }, (_, i) => WORDS[(i * 7 + Math.floor(i / 12)) % WORDS.length]).join(" ")}`;
    const res = await post(node, "/tokenize", { model: MODEL, content: text });
    const n = ((await res.json()) as { tokens: number[] }).tokens.length;
    if (n <= tokens) return text;
    words = Math.floor((words * tokens) / n) - 1;
  }
}

/** Milliseconds to the first streamed token of a completion of `prompt` (the model loaded on demand first, if it must be). */
async function firstToken(node: TestNode, prompt: string, extra: { headers?: Record<string, string>; body?: Record<string, unknown> } = {}): Promise<number> {
  const t = performance.now();
  const res = await post(node, "/v1/completions", { model: MODEL, prompt, max_tokens: 2, temperature: 0, stream: true, ...extra.body }, { headers: extra.headers ?? {} });
  if (res.status !== 200) throw new Error(`completion: ${res.status} ${await res.text()}`);
  const reader = res.body!.getReader();
  await reader.read();
  const ms = performance.now() - t;
  while (!(await reader.read()).done);
  return ms;
}

const serves = async (via: MeshTestNode, id: string) => (await meshStatus(via)).peers.find((p) => p.nodeId === id)?.serving.includes(MODEL) === true;
const EVENTS = { hit: "fetched", miss: "asked, none to give", declined: "judged reading faster", failed: "fetch failed" } as const;
const follow = async (n: MeshTestNode) => {
  const m = parseScrape(await (await fetch(`${n.url}/metrics`)).text());
  const events = Object.fromEntries(Object.keys(EVENTS).map((event) => [event, valueOf(m, "mesh_kv_follow_total", { event })])) as Record<keyof typeof EVENTS, number>;
  return { events, bytes: valueOf(m, "mesh_kv_follow_bytes_total", { direction: "fetched" }) };
};
/** What the host did for the moved turn, from its counters before and after. */
const didOf = (before: Awaited<ReturnType<typeof follow>>, after: Awaited<ReturnType<typeof follow>>) =>
  (Object.keys(EVENTS) as (keyof typeof EVENTS)[]).filter((e) => after.events[e] > before.events[e]).map((e) => EVENTS[e])[0] ?? "did not ask (a short prompt)";

/** One chat moved from b's replica to a: its next turn's first token with the cache followed and read whole, and what a did. */
async function movedTurn(a: MeshTestNode, b: MeshTestNode, length: number, run: number): Promise<{ prefilled: number; restored: number; verify: number; did: string; bytes: number }> {
  // The host pressed: b serves a replica beside it.
  const stop = new AbortController();
  const load = burst(a, MODEL, 4, stop.signal, new Set());
  await waitFor(() => serves(a, b.nodeId), { what: "b to serve a replica", timeoutMs: 180_000 }).finally(() => stop.abort());
  await load;
  const prompt = await promptOf(a, length, run);
  const session = { "x-session-id": `bench-${length}-${run}` };
  // The chat's first turn: b's client, b's own replica.
  await firstToken(b, prompt, { headers: session });
  // The replica goes, saving its slot as a released one does; the next turn goes to the host.
  await post(b, "/api/v1/unload", { model_name: MODEL });
  await waitFor(async () => !(await serves(a, b.nodeId)), { what: "a to see b's replica gone", timeoutMs: 60_000 });
  const before = await follow(a);
  const restored = await firstToken(b, `${prompt} river stone`, { headers: session });
  const after = await follow(a);
  // The same turn read whole, the same way (b's client, a's server).
  const prefilled = await firstToken(b, `${prompt} river stone`, { headers: session, body: { cache_prompt: false } });
  // Checking one block of a member's cache by reading it again: a block's KV depends on every token before it,
  // so block j costs reading its first j+1 blocks; a block drawn at random (which a forger cannot foresee)
  // costs on average reading to the middle block.
  const tokens = ((await (await post(a, "/tokenize", { model: MODEL, content: `${prompt} river stone` })).json()) as { tokens: number[] }).tokens;
  const middle = Math.max(1, Math.ceil(Math.floor(tokens.length / BLOCK_TOKENS) / 2)) * BLOCK_TOKENS;
  const verify = await firstToken(b, "", { headers: session, body: { prompt: tokens.slice(0, middle), cache_prompt: false } });
  return { prefilled, restored, verify, did: didOf(before, after), bytes: after.bytes - before.bytes };
}

/** The moved turn: rows of the table, and the break-even. */
async function moved(places: Places): Promise<{ rows: string[][]; breakEven: number | undefined }> {
  const file = await testModel("wide", "q8_0");
  const models = { [`${MODEL}.gguf`]: file };
  const a = await places.start([...LLAMA, "--vram", "512MiB", "--model", MODEL], { models, name: "a" });
  await keepsSlots(a, MODEL, await identityKnown(a, MODEL, 120_000));
  const b = await places.start([...LLAMA, "--vram", "256MiB", "--replica-idle", "10m", "--join", a.token], { models, name: "b" });
  await waitForFullMesh([a, b]);
  await waitFor(async () => ((await (await fetch(`${a.url}/v1/models/${MODEL}`)).json()) as { mesh?: { content_holders?: string[] } }).mesh?.content_holders?.includes(b.nodeId), {
    what: "b to announce the model's content",
    timeoutMs: 120_000,
  });
  const rows: string[][] = [];
  let breakEven: number | undefined;
  for (const length of LENGTHS) {
    const runs: Awaited<ReturnType<typeof movedTurn>>[] = [];
    for (let run = 0; run < RUNS; run++) runs.push(await movedTurn(a, b, length, run));
    const prefilled = pct(runs.map((r) => r.prefilled), 50);
    const restored = pct(runs.map((r) => r.restored), 50);
    const dids = [...new Set(runs.map((r) => r.did))];
    if (breakEven === undefined && dids.length === 1 && dids[0] === EVENTS.hit && restored < prefilled) breakEven = length;
    const checked = restored + pct(runs.map((r) => r.verify), 50);
    rows.push([String(length), prefilled.toFixed(0), restored.toFixed(0), `${(prefilled / restored).toFixed(1)}x`, checked.toFixed(0), `${(prefilled / checked).toFixed(1)}x`, dids.join(", "), (pct(runs.map((r) => r.bytes), 50) / 2 ** 20).toFixed(2)]);
  }
  return { rows, breakEven };
}

/** The turn after a reload on one node: rows of the table, and the break-even. */
async function reloaded(): Promise<{ rows: string[][]; breakEven: number | undefined }> {
  const node = await startNode([...LLAMA, "--model", await testModel("wide", "q8_0")]);
  try {
    await identityKnown(node, MODEL, 120_000);
    // The server loaded at start may have come before its identity: the next load keeps slots.
    await unloadAll(node, MODEL);
    const rows: string[][] = [];
    let breakEven: number | undefined;
    for (const length of LENGTHS) {
      const prompt = await promptOf(node, length);
      // Prefilled: the turn after a reload with no saved slot.
      await firstToken(node, prompt);
      await unloadAll(node);
      for (const f of savedSlots(node)) rmSync(f);
      const prefilled = await firstToken(node, `${prompt} river`);
      // Restored: the conversation's next turn after a reload with the slot saved at the unload.
      const unloadMs = await unloadAll(node);
      const bytes = savedSlots(node).reduce((sum, f) => sum + statSync(f).size, 0);
      const restored = await firstToken(node, `${prompt} river stone`);
      // Under MIN_SAVED_TOKENS no slot is kept: both columns are then one thing measured twice.
      if (breakEven === undefined && bytes > 0 && restored < prefilled) breakEven = length;
      rows.push([String(length), prefilled.toFixed(0), restored.toFixed(0), `${(prefilled / restored).toFixed(1)}x`, (bytes / 2 ** 20).toFixed(1), unloadMs.toFixed(0)]);
      await unloadAll(node);
      for (const f of savedSlots(node)) rmSync(f);
    }
    return { rows, breakEven };
  } finally {
    await node.stop();
  }
}

const ahead = (breakEven: number | undefined, what: string) => `break-even: ${breakEven === undefined ? "not reached on this ladder" : `${what} from ${breakEven} tokens`}`;

try {
  const { places, why } = values.lab ? await labOrLoopback(Number(values.mbit)) : { places: loopbackPlaces(), why: undefined };
  if (why) console.log(`lab: not used, ${why}`);
  try {
    const m = await moved(places);
    console.log(`\nmoved: ${places.label}\n`);
    printTable(["prompt tokens", "moved turn's first token, read whole (ms)", "cache followed (ms)", "faster", "followed, a random block read again to check it (ms)", "faster", "host did", "KV fetched (MiB)"], m.rows);
    console.log(`\ntwo nodes, ${MODEL}, --parallel 1, ${values.threads} threads each; medians of ${RUNS} chats per length: the first turn on b's replica, the next on a after b's replica is unloaded; both columns b's client, a's server`);
    console.log(ahead(m.breakEven, "a fetched cache is ahead"));
    console.log("a random block read again: the prompt's first half read (a block's KV depends on every token before it), the mean cost of checking one block a forger cannot foresee");
  } finally {
    await places.close();
  }
  if (!values["skip-reload"]) {
    const r = await reloaded();
    console.log("\nreloaded: one node\n");
    printTable(["prompt tokens", "first token after a reload, prefilled (ms)", "restored (ms)", "faster", "slot file (MiB)", "unload with its save (ms)"], r.rows);
    console.log(`\none node, ${MODEL}, --parallel 1, ${values.threads} threads; each turn loads the model on demand (the load is in both columns)`);
    console.log(ahead(r.breakEven, `a restored slot is ahead (slots under ${MIN_SAVED_TOKENS} tokens are not kept)`));
  }
} finally {
  await killAllChildren();
}
