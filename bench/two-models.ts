#!/usr/bin/env bun
/**
 * Two models on one node, generating alone and at once: how the node shares its cores among its
 * llama-servers (`--threads-policy`, pool/cpu-threads.ts). One node (`bun main.ts`) with
 * `--max-loaded-models 2` serves two random-weight models of one preset (other seeds); each
 * generates `tokens` tokens alone, then both at once, `runs` times. First, a node that runs one
 * model at a time (the default limit) generates alone: the speed a single-process node keeps. Under `all` (the old way) every
 * llama-server takes every core and polls for work; under `share` they divide the cores and sleep
 * while waiting. Each policy gets a fresh node, so both rows come from the same script.
 *
 *   bun bench/two-models.ts [--tokens 128] [--runs 3] [--preset wide|tiny] [--threads-policy both|share|all]
 *
 * The table is printed, never judged (other programs on the machine move it: the load average is
 * printed too); the exit code is 1 only when the bench could not run.
 */
import { loadavg, availableParallelism } from "node:os";
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { provideDevLlama } from "../scripts/llama-dev.ts";
import type { PresetName } from "../scripts/test-model/presets.ts";
import { loaded, post } from "../harness/api.ts";
import { killAllChildren } from "../harness/children.ts";
import { testModel } from "../harness/models.ts";
import { startNode, type TestNode } from "../harness/node.ts";
import { THREADS_POLICIES, type ThreadsPolicy } from "../pool/cpu-threads.ts";
import { pct, printTable } from "./report.ts";
import { step, watchdog } from "./watchdog.ts";

const { values } = parseArgs({
  options: {
    tokens: { type: "string", default: "128" },
    runs: { type: "string", default: "3" },
    preset: { type: "string", default: "wide" },
    "threads-policy": { type: "string", default: "both" },
    "limit-minutes": { type: "string", default: "10" },
  },
});
const TOKENS = Number(values.tokens);
const RUNS = Number(values.runs);
const PRESET = values.preset as PresetName;
if (!Number.isInteger(TOKENS) || TOKENS < 1 || !Number.isInteger(RUNS) || RUNS < 1) throw new Error("--tokens and --runs must be positive integers");
if (PRESET !== "tiny" && PRESET !== "wide") throw new Error(`--preset must be tiny or wide, got "${PRESET}"`);
const policyArg = values["threads-policy"]!;
if (policyArg !== "both" && !(THREADS_POLICIES as readonly string[]).includes(policyArg)) throw new Error(`--threads-policy must be both, ${THREADS_POLICIES.join(" or ")}; got "${policyArg}"`);
// The old way first: the row to compare against.
const POLICIES: ThreadsPolicy[] = policyArg === "both" ? ["all", "share"] : [policyArg as ThreadsPolicy];
const MODELS = ["model-a", "model-b"] as const;
const DEADLINE_MS = 180_000;

process.env.MESH_LLAMA_DIR = (await provideDevLlama()).dir;
watchdog(Number(values["limit-minutes"]) * 60_000, killAllChildren);

interface Generation {
  /** Decode speed llama-server reports (timings.predicted_per_second). */
  tps: number;
  wallMs: number;
}

async function generate(node: TestNode, model: string, tokens: number): Promise<Generation> {
  const started = performance.now();
  const res = await post(node, "/v1/completions", { model, prompt: "Once upon a time", max_tokens: tokens, temperature: 0, ignore_eos: true }, { signal: AbortSignal.timeout(DEADLINE_MS) });
  const body = (await res.json()) as { timings?: { predicted_n: number; predicted_per_second: number } };
  if (res.status !== 200 || !body.timings) throw new Error(`${model}: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
  if (body.timings.predicted_n !== tokens) throw new Error(`${model}: generated ${body.timings.predicted_n} tokens, asked for ${tokens}`);
  return { tps: body.timings.predicted_per_second, wallMs: performance.now() - started };
}

/** The threads flags a model's llama-server runs with, from its command line. */
function threadFlags(pid: number): string {
  const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
  const flags = argv.flatMap((a, i) => (["-t", "--threads", "-tb", "--threads-batch", "--poll"].includes(a) ? [`${a} ${argv[i + 1]}`] : []));
  return flags.join(" ") || "llama.cpp's own";
}

interface Row {
  policy: ThreadsPolicy;
  /** As the table shows it. */
  model: string;
  /** As the API knows it. */
  name: string;
  threads: string;
  alone: Generation[];
  together: Generation[];
}

/** A node with `models` (the limit: all of them at once), each loaded and warmed up; their rows. */
async function withNode(policy: ThreadsPolicy, models: readonly string[], use: (node: TestNode, rows: Row[]) => Promise<Row[]>): Promise<Row[]> {
  step(`start a node with --threads-policy ${policy} and ${models.join(", ")}`);
  const files = Object.fromEntries(await Promise.all(models.map(async (m, i) => [`${m}.gguf`, await testModel(PRESET, "q8_0", i + 1)] as const)));
  const args = ["--max-loaded-models", String(models.length), "--ctx-size", String(Math.max(512, TOKENS + 64)), "--llamacpp-args", "--parallel 1", "--threads-policy", policy, "--replicas", "off"];
  const node = await startNode(args, { models: files });
  try {
    for (const m of models) {
      step(`${policy}: load ${m} and warm it up`);
      const load = await post(node, "/api/v1/load", { model_name: m }, { signal: AbortSignal.timeout(DEADLINE_MS) });
      if (load.status !== 200) throw new Error(`load ${m}: ${load.status} ${await load.text()}`);
      await generate(node, m, 8);
    }
    const servers = await loaded(node);
    const label = models.length === 1 ? " (alone on its node)" : "";
    return await use(node, models.map((m) => ({ policy, model: `${m}${label}`, name: m, threads: threadFlags(servers.find((s) => s.model_name === m)!.pid), alone: [], together: [] })));
  } finally {
    await node.stop();
  }
}

/** Two models that may run at once: each alone, then both together, `RUNS` times. */
const twoModels = (policy: ThreadsPolicy) =>
  withNode(policy, MODELS, async (node, rows) => {
    for (let run = 0; run < RUNS; run++) {
      for (const row of rows) {
        step(`${policy}, run ${run + 1}/${RUNS}: ${row.name} alone`);
        row.alone.push(await generate(node, row.name, TOKENS));
      }
      step(`${policy}, run ${run + 1}/${RUNS}: both at once`);
      const both = await Promise.all(rows.map((r) => generate(node, r.name, TOKENS)));
      both.forEach((g, i) => rows[i]!.together.push(g));
    }
    return rows;
  });

/** A node that runs one model at a time: the speed a single-process node keeps. */
const oneModel = (policy: ThreadsPolicy) =>
  withNode(policy, [MODELS[0]], async (node, rows) => {
    for (let run = 0; run < RUNS; run++) {
      step(`${policy}, run ${run + 1}/${RUNS}: one model on its node`);
      rows[0]!.alone.push(await generate(node, rows[0]!.name, TOKENS));
    }
    return rows;
  });

const before = loadavg()[0]!;
const rows: Row[] = [];
try {
  for (const policy of POLICIES) rows.push(...(await oneModel(policy)), ...(await twoModels(policy)));
} finally {
  await killAllChildren();
}
const median = (gs: Generation[], f: (g: Generation) => number) => pct(gs.map(f), 50);
printTable(
  ["policy", "model", "llama-server threads", "alone tok/s", "together tok/s", "together / alone", "together wall s"],
  rows.map((r) => {
    const alone = median(r.alone, (g) => g.tps);
    if (r.together.length === 0) return [r.policy, r.model, r.threads, alone.toFixed(1), "-", "-", "-"];
    const together = median(r.together, (g) => g.tps);
    return [r.policy, r.model, r.threads, alone.toFixed(1), together.toFixed(1), `${((together / alone) * 100).toFixed(0)}%`, (median(r.together, (g) => g.wallMs) / 1000).toFixed(2)];
  }),
);
console.log(
  `\n${TOKENS} tokens per generation, medians of ${RUNS} run(s); ${PRESET} q8_0 random-weight models (seeds 1 and 2); a node with --max-loaded-models 1 and one model, then one with 2 and both, ` +
    `${availableParallelism()} cores shared with the client and the node; load average ${before.toFixed(2)} before, ${loadavg()[0]!.toFixed(2)} after (other programs move the numbers).`,
);
