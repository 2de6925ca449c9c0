#!/usr/bin/env bun
/**
 * A mesh of N real nodes (the compiled `mesh`) on loopback, relays off, under churn: one founder
 * serves the `tiny` test model (one thread, small context), the others join with its token and
 * `--fetch off`. For each size, on a fresh mesh:
 *
 * 1. formation: joiners spawned in paced batches (`--batch`, each waiting for its nodes' "mesh
 *    endpoint up"); the time from the last spawn until every node lists the other N-1 as peers and
 *    all agree on one catalog (the status's `catalogDigest`; for a binary without it, a digest of
 *    each node's `/v1/models`: ids and hosts); and the live members dropped and dials failed meanwhile;
 * 2. idle cost over a rest window with nothing polled: each node's own CPU (/proc utime + stime, its
 *    llama-server and rpc-server children apart; split into its event loop, iroh's runtime and the
 *    rest, with their wake-ups) and RSS;
 * 3. control traffic per node, at rest and while the founder's model unloads and loads 4 times: the
 *    status's `control` counters ("-" for a binary without them) and all loopback bytes / N;
 * 4. a new joiner: time until a chat through it is answered, and until every node lists it;
 * 5. churn: kill -9 of a tenth of the joiners (at least one) while every survivor chats one chat at
 *    a time (max_tokens 1, 30 s timeout): time until the survivors list exactly each other, agree on
 *    the catalog and see one host of the model; chats answered and failed, until 5 s after; samples
 *    where the model had other than one host; then the killed restart on their state dirs: time
 *    until every node lists all N again.
 * 6. the host killed mid-answer: kill -9 of the founder while streams through 8 joiners are in
 *    flight; when each client's stream ended and how (the dialect's error event, a cut), apart for
 *    entries that watch the founder (its ring neighbours) and those that hear of it from them.
 *
 *   bun bench/scale.ts [--nodes 10[,25,...]] [--short] [--binary PATH] [--batch 5]
 *                      [--rest-seconds 20] [--deadline-s 120] [--chats 1000]
 *
 * `--short` is N=4, a 3 s rest, 10 chats per survivor (what .ci/run runs). `--binary` measures a
 * binary built before (an older commit's) instead of building this tree. Goals at N=50: agreement
 * within 15 s of the last spawn; <= 1 % of a core and <= 100 MiB RSS per idle node; control traffic
 * per idle node at most linear in N; after 10 % churn, agreement within 10 s and no failed chat;
 * one host per model at every sample; a stream whose host dies ends in an error within 10 s. The tables are printed, never judged; the exit code is 1
 * only when a mesh could not be measured. Every node is stopped at the end.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { provideDevLlama } from "../scripts/llama-dev.ts";
import { killAllChildren, spawnChild } from "../harness/children.ts";
import { testModel } from "../harness/models.ts";
import { printTable } from "./report.ts";
import { MEASURES, ScaleRun, type MeasureKey, type Settings } from "./scale-phases.ts";
import { step, watchdog } from "./watchdog.ts";

const { values } = parseArgs({
  options: {
    nodes: { type: "string", default: "10" },
    short: { type: "boolean", default: false },
    binary: { type: "string" },
    batch: { type: "string", default: "5" },
    "rest-seconds": { type: "string" },
    "deadline-s": { type: "string" },
    chats: { type: "string" },
    "limit-minutes": { type: "string" },
  },
});

function count(flag: string, text: string, min: number): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < min) throw new Error(`--${flag} takes a whole number >= ${min}; got "${text}"`);
  return n;
}
const SIZES = values.short ? [4] : values.nodes.split(",").map((s) => count("nodes", s.trim(), 2));
const REST_S = count("rest-seconds", values["rest-seconds"] ?? (values.short ? "3" : "20"), 1);
const DEADLINE_S = count("deadline-s", values["deadline-s"] ?? (values.short ? "60" : "120"), 1);
const BATCH = count("batch", values.batch, 1);
const CHATS = count("chats", values.chats ?? (values.short ? "10" : "1000"), 1);
const LIMIT_MIN = Number(values["limit-minutes"] ?? (values.short ? 4 : 15 * SIZES.length));

process.env.MESH_LLAMA_DIR = (await provideDevLlama()).dir;
watchdog(LIMIT_MIN * 60_000, killAllChildren);

let buildDir: string | undefined;
let binary: string;
if (values.binary) {
  binary = resolve(values.binary);
} else {
  step("building the mesh binary");
  buildDir = mkdtempSync(join(tmpdir(), "mesh-bench-bin-"));
  binary = join(buildDir, "mesh");
  const build = spawnChild("build", [process.execPath, join(import.meta.dir, "..", "scripts", "build.ts"), "--outfile", binary]);
  if ((await build.proc.exited) !== 0) throw new Error(`build failed:\n${build.output()}`);
}

const results = new Map<number, Map<MeasureKey, string>>();
let failed = false;
try {
  const modelFile = await testModel("tiny", "q8_0");
  const settings: Settings = { binary, model: basename(modelFile, ".gguf"), modelFile, batch: BATCH, deadlineMs: DEADLINE_S * 1000, restMs: REST_S * 1000, chatsPerNode: CHATS };
  for (const n of SIZES) {
    const run = new ScaleRun(settings, n);
    try {
      await run.form();
      await run.rest();
      await run.newJoiner();
      await run.modelChanges();
      await run.churn();
      await run.hostKilled();
    } catch (err) {
      failed = true;
      console.error(`N=${n}: the run stopped: ${(err as Error).message}`);
    } finally {
      step(`N=${n}: stopping ${run.started.length} nodes`);
      await run.stop();
    }
    results.set(n, run.out);
    console.log(`\n## N=${n}${values.binary ? ` (${binary})` : ""}`);
    for (const section of new Set(MEASURES.map((m) => m.section))) {
      const rows = MEASURES.filter((m) => m.section === section).map((m) => [m.label, run.out.get(m.key) ?? "-"]);
      console.log(`\n${section}`);
      printTable(["measure", `N=${n}`], rows);
    }
  }
} finally {
  await killAllChildren();
  if (buildDir) rmSync(buildDir, { recursive: true, force: true });
}

console.log(`\n## summary${values.binary ? ` (${binary})` : ""}\n`);
printTable(
  ["measure", ...SIZES.map((n) => `N=${n}`), "goal (N=50)"],
  MEASURES.map((m) => [m.label, ...SIZES.map((n) => results.get(n)?.get(m.key) ?? "-"), m.goal]),
);
console.log(`\nloopback, relays off; rest ${REST_S} s with nothing polled; deadlines ${DEADLINE_S} s; joiners spawned ${BATCH} at a time; CPU in % of one core (${SIZES.length > 1 ? "a fresh mesh per size" : "one mesh"})`);
console.log("loopback bytes are everything on lo: QUIC with its acks, the nodes' HTTP to their children, and (in the changing window) the bench's loads and unloads");
process.exit(failed ? 1 : 0);
