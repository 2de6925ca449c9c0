#!/usr/bin/env bun
/**
 * What a conversation's KV cache that outlives its server is worth: on one node, a chat opens with
 * a long prompt (`wide`, `--lengths` tokens), the model is unloaded (its slot saved) and the next
 * turn loads it again: time to the first token of that turn with the slot restored, against the
 * same with the saved slots deleted first (the whole prompt read again), the slot file's size, and
 * the shortest prompt of the ladder at which the restore is ahead (the break-even on this machine).
 *
 *   bun bench/kv-follow.ts [--lengths 64,128,256,512,1024,1900] [--threads 2]
 *
 * The turn moved between two replicas over the lab's 1 Gbit/s link is not measured yet: the node
 * does not fetch a slot from a peer (issue 30's next step). Everything runs on loopback.
 */
import { rmSync, statSync } from "node:fs";
import { parseArgs } from "node:util";
import { provideDevLlama } from "../scripts/llama-dev.ts";
import { killAllChildren } from "../harness/children.ts";
import { post } from "../harness/api.ts";
import { identityKnown, savedSlots, unloadAll } from "../harness/slot-files.ts";
import { testModel } from "../harness/models.ts";
import { startNode, type TestNode } from "../harness/node.ts";
import { MIN_SAVED_TOKENS } from "../pool/slot-cache.ts";
import { printTable } from "./report.ts";

const { values } = parseArgs({
  options: {
    lengths: { type: "string", default: "64,128,256,512,1024,1900" },
    threads: { type: "string", default: "2" },
  },
});
const LENGTHS = values.lengths.split(",").map(Number);
const MODEL = "wide-q8_0";
const WORDS = ["river", "stone", "cloud", "mesh", "node", "token", "cache", "prefix", "alpha", "delta", "gamma", "beta"];

process.env.MESH_LLAMA_DIR = (await provideDevLlama()).dir;

/** A prompt of about `tokens` tokens of this model (it reads a word as a few tokens: asked, not guessed). */
async function promptOf(node: TestNode, tokens: number): Promise<string> {
  let words = Math.ceil(tokens / 3);
  for (;;) {
    const text = Array.from({ length: words }, (_, i) => WORDS[(i * 7 + Math.floor(i / 12)) % WORDS.length]).join(" ");
    const res = await post(node, "/tokenize", { model: MODEL, content: text });
    const n = ((await res.json()) as { tokens: number[] }).tokens.length;
    if (n <= tokens) return text;
    words = Math.floor((words * tokens) / n) - 1;
  }
}

/** Milliseconds to the first streamed token of a completion of `prompt` (the model loaded on demand first, if it must be). */
async function firstToken(node: TestNode, prompt: string): Promise<number> {
  const t = performance.now();
  const res = await post(node, "/v1/completions", { model: MODEL, prompt, max_tokens: 2, temperature: 0, stream: true });
  if (res.status !== 200) throw new Error(`completion: ${res.status} ${await res.text()}`);
  const reader = res.body!.getReader();
  await reader.read();
  const ms = performance.now() - t;
  while (!(await reader.read()).done);
  return ms;
}

const node = await startNode(["--ctx-size", "2048", "--llamacpp-args", `--threads ${values.threads} --threads-batch ${values.threads} --parallel 1`, "--rpc-threads", "1", "--model", await testModel("wide", "q8_0")]);
try {
  await identityKnown(node, MODEL, 120_000);
  // The server loaded at start may have come before its identity: the next load keeps slots.
  await unloadAll(node);
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
  printTable(["prompt tokens", "first token after a reload, prefilled (ms)", "restored (ms)", "faster", "slot file (MiB)", "unload with its save (ms)"], rows);
  console.log(`\none node, ${MODEL}, --parallel 1, ${values.threads} threads; each turn loads the model on demand (the load is in both columns)`);
  console.log(`break-even: ${breakEven === undefined ? "not reached on this ladder" : `a restored slot is ahead from ${breakEven} tokens, the shortest length of the ladder that keeps one (slots under ${MIN_SAVED_TOKENS} tokens are not kept)`}`);
} finally {
  await node.stop();
  await killAllChildren();
}
