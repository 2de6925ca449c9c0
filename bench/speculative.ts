#!/usr/bin/env bun
/**
 * Speculative decoding through a node: tokens/s and the draft's acceptance rate for one target with
 * no draft, with itself as the draft (the upper bound: every drafted token is accepted, and the
 * draft costs as much as the target), and with a mismatched draft (the lower bound: same
 * vocabulary, other random weights, next to nothing accepted). Random-weight test models, so the
 * rows bound what a real draft does; they are not a real pair's speed-up. Acceptance is read from
 * the node's /metrics (mesh_draft_accepted_total / mesh_draft_tokens_total).
 *
 *   bun bench/speculative.ts [--requests 8] [--tokens 128] [--preset tiny|wide]
 */
import { parseArgs } from "node:util";
import { provideDevLlama } from "../scripts/llama-dev.ts";
import { killAllChildren } from "../harness/children.ts";
import { testModel } from "../harness/models.ts";
import { startNode, type TestNode } from "../harness/node.ts";
import { parseScrape, valueOf } from "../harness/prometheus.ts";
import { pct, printTable } from "./report.ts";
import type { PresetName } from "../scripts/test-model/presets.ts";

const { values } = parseArgs({
  options: {
    requests: { type: "string", default: "8" },
    tokens: { type: "string", default: "128" },
    preset: { type: "string", default: "tiny" },
  },
});
const REQUESTS = Number(values.requests);
const TOKENS = Number(values.tokens);
const PRESET = values.preset as PresetName;
if (!Number.isInteger(REQUESTS) || REQUESTS < 1 || !Number.isInteger(TOKENS) || TOKENS < 1) throw new Error("--requests and --tokens must be positive integers");
if (PRESET !== "tiny" && PRESET !== "wide") throw new Error(`--preset must be tiny or wide, got "${PRESET}"`);
const LLAMA_ARGS = "--threads 1 --threads-batch 1 --parallel 1";

process.env.MESH_LLAMA_DIR = (await provideDevLlama()).dir;

interface Row {
  draft: string;
  label: string;
  decodeTps: number;
  wallTps: number;
  drafted: number;
  accepted: number;
}

const post = (n: TestNode, path: string, body: unknown) => fetch(`${n.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

async function counters(n: TestNode): Promise<{ drafted: number; accepted: number }> {
  const s = parseScrape(await (await fetch(`${n.url}/metrics`)).text());
  return { drafted: valueOf(s, "mesh_draft_tokens_total", { model: "target" }), accepted: valueOf(s, "mesh_draft_accepted_total", { model: "target" }) };
}

async function complete(n: TestNode): Promise<{ predicted: number; decodeTps: number; ms: number }> {
  const t = performance.now();
  const res = await post(n, "/v1/completions", { model: "target", prompt: "Once upon a time", max_tokens: TOKENS, temperature: 0, ignore_eos: true });
  const body = (await res.json()) as { timings?: { predicted_n: number; predicted_per_second: number } };
  if (res.status !== 200 || !body.timings) throw new Error(`completion: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
  return { predicted: body.timings.predicted_n, decodeTps: body.timings.predicted_per_second, ms: performance.now() - t };
}

async function measure(n: TestNode, draft: string | undefined, label: string): Promise<Row> {
  const load = await post(n, "/api/v1/load", { model_name: "target", ...(draft ? { draft_model: draft } : {}) });
  if (load.status !== 200) throw new Error(`load with draft ${draft ?? "none"}: ${load.status} ${await load.text()}`);
  await complete(n); // warm-up, not counted
  const before = await counters(n);
  const decode: number[] = [];
  let tokens = 0;
  let ms = 0;
  for (let i = 0; i < REQUESTS; i++) {
    const r = await complete(n);
    decode.push(r.decodeTps);
    tokens += r.predicted;
    ms += r.ms;
  }
  const after = await counters(n);
  return { draft: draft ?? "none", label, decodeTps: pct(decode, 50), wallTps: (tokens / ms) * 1000, drafted: after.drafted - before.drafted, accepted: after.accepted - before.accepted };
}

let node: TestNode | undefined;
try {
  node = await startNode(["--ctx-size", String(Math.max(512, TOKENS + 64)), "--llamacpp-args", LLAMA_ARGS], {
    models: { "target.gguf": await testModel(PRESET, "f32"), "mismatched.gguf": await testModel(PRESET, "f32", 2) },
  });
  const rows = [await measure(node, undefined, "no draft"), await measure(node, "target", "upper bound (draft = target)"), await measure(node, "mismatched", "lower bound (mismatched draft)")];
  const rate = (r: Row) => (r.drafted > 0 ? `${((r.accepted / r.drafted) * 100).toFixed(1)}%` : "-");
  printTable(
    ["draft", "row", "decode tokens/s (p50)", "tokens/s (wall)", "drafted", "accepted", "acceptance"],
    rows.map((r) => [r.draft, r.label, r.decodeTps.toFixed(1), r.wallTps.toFixed(1), String(r.drafted), String(r.accepted), rate(r)]),
  );
  console.log(
    `\n${REQUESTS} completions of ${TOKENS} tokens per row (greedy, after one warm-up), ${PRESET} f32 random-weight target; llama-server ${LLAMA_ARGS}, llama.cpp's default draft length; ` +
      `${navigator.hardwareConcurrency} cores shared by client, node and llama-server. Bounds, not a real pair's speed-up: the upper-bound draft costs as much as its target.`,
  );
} finally {
  await node?.stop();
  await killAllChildren();
}
