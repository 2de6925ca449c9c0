#!/usr/bin/env bun
/**
 * The soak: many concurrent streaming clients for a while against a 3-node mesh serving two models,
 * with one worker killed half-way. The `wide` model is split over A (its host) and B (whose
 * rpc-server holds part of it); the `tiny` model runs on C alone. Clients call A's and C's APIs,
 * half each and both models, so every other request is forwarded over the mesh; B gets kill -9 at
 * half time, which leaves `wide` without the memory it needs (a clean 503 is the right answer then).
 * Every request has a deadline and ends in exactly one outcome (bench/soak-client.ts); the bench
 * checks that none is lost (started = completed + clean errors + unclean ends + hangs), prints a
 * table per phase and model, and each node's RSS sampled over the run.
 *
 *   bun bench/soak.ts [--clients 64] [--seconds 60] [--tokens 16] [--parallel 4] [--deadline-seconds 30] [--loopback] [--logs-dir DIR] [--llama-extra="--cache-ram 0"]
 *
 * In the lab (harness/lab/lab.ts: every node in its own network namespace) where it can run, else on
 * loopback, and it says which. The table is printed, never judged; the exit code is 1 only when the
 * soak could not run or a request went unaccounted for.
 */
import { mkdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { readGgufFacts } from "../models/gguf-info.ts";
import { needOf } from "../models/model-need.ts";
import { provideDevLlama } from "../scripts/llama-dev.ts";
import { loaded } from "../harness/api.ts";
import { killAllChildren } from "../harness/children.ts";
import { waitForFullMesh } from "../harness/mesh.ts";
import { testModel } from "../harness/models.ts";
import { waitFor, withDeadline } from "../harness/wait.ts";
import { labOrLoopback, loopbackPlaces, type PlacedNode, type Places } from "./places.ts";
import { printTable } from "./report.ts";
import { sampleRss } from "./rss.ts";
import { clientLoop, streamOnce, type RequestRecord, type SoakTarget } from "./soak-client.ts";
import { errorMessages, PHASE_HEADER, phaseRows, RSS_HEADER, rssRows } from "./soak-report.ts";
import { step, watchdog } from "./watchdog.ts";

const { values } = parseArgs({
  options: {
    clients: { type: "string", default: "64" },
    seconds: { type: "string", default: "60" },
    tokens: { type: "string", default: "16" },
    parallel: { type: "string", default: "4" },
    "deadline-seconds": { type: "string", default: "30" },
    loopback: { type: "boolean", default: false },
    "limit-minutes": { type: "string", default: "15" },
    "logs-dir": { type: "string" },
    "llama-extra": { type: "string", default: "" },
  },
});
const CLIENTS = Number(values.clients);
const SECONDS = Number(values.seconds);
const TOKENS = Number(values.tokens);
const PARALLEL = Number(values.parallel);
const DEADLINE_MS = Number(values["deadline-seconds"]) * 1000;
const CTX = 512;

process.env.MESH_LLAMA_DIR = (await provideDevLlama()).dir;
// One thread per llama.cpp process on a 2-core machine; several slots so concurrent requests are
// batched instead of queued one by one inside llama-server (each slot gets CTX / PARALLEL of context).
const LLAMA_EXTRA = values["llama-extra"]!.trim();
const LLAMA_ARGS = ["--ctx-size", String(CTX), "--llamacpp-args", `--threads 1 --threads-batch 1 --parallel ${PARALLEL}${LLAMA_EXTRA ? ` ${LLAMA_EXTRA}` : ""}`, "--rpc-threads", "1"];

let places: Places | undefined;
const cleanup = async () => {
  await places?.close().catch((err: unknown) => console.error(`cleanup: ${String(err)}`));
  await killAllChildren();
};
watchdog(Number(values["limit-minutes"]) * 60_000, cleanup);

const needOfFile = async (path: string) => needOf(statSync(path).size, await readGgufFacts(path), CTX);
const name = (path: string) => path.split("/").pop()!.replace(/\.gguf$/, "");

interface Mesh {
  a: PlacedNode;
  b: PlacedNode;
  c: PlacedNode;
  wide: string;
  tiny: string;
  /** What wide needs at CTX, and what A and B each offer (--vram), in bytes. */
  wideNeed: number;
  offer: number;
}

/** A hosts wide over B's rpc-server (by --vram neither holds it alone), C hosts tiny; both reachable from A and C. */
async function startMesh(p: Places): Promise<Mesh> {
  const widePath = await testModel("wide", "q8_0");
  const tinyPath = await testModel("tiny", "q8_0");
  const [wide, tiny] = [name(widePath), name(tinyPath)];
  const wideNeed = await needOfFile(widePath);
  const offer = Math.ceil(wideNeed * 0.6);
  const half = ["--vram", String(offer)];
  step(`A hosts ${wide}, B lends its rpc-server`);
  const a = await p.start([...LLAMA_ARGS, ...half, "--model", widePath], { name: "A" });
  const b = await p.start([...LLAMA_ARGS, ...half, "--fetch", "off", "--join", a.token], { name: "B" });
  await waitFor(async () => (await loaded(a)).some((s) => s.model_name === wide && s.state === "ready" && (s as { rpc_workers?: string[] }).rpc_workers?.length === 2), {
    what: `${wide} to run on A over A's and B's rpc-servers`,
    timeoutMs: 180_000,
  });
  step(`C hosts ${tiny}`);
  // Room for tiny, far from what wide needs: C never takes part in wide.
  const c = await p.start([...LLAMA_ARGS, "--vram", String(Math.ceil((await needOfFile(tinyPath)) * 2)), "--model", tinyPath, "--join", a.token], { name: "C" });
  await waitForFullMesh([a, b, c], 60_000);
  step("both models answer through both entries");
  for (const [via, model] of [[a, wide], [a, tiny], [c, wide], [c, tiny]] as const) {
    const target = { model, entry: "", url: via.url };
    await waitFor(async () => (await streamOnce(target, 2, 30_000, () => 0)).record.outcome.kind === "completed", { what: `${model} to answer through ${via.nodeId}`, timeoutMs: 120_000 });
  }
  return { a, b, c, wide, tiny, wideNeed, offer };
}

/** One line per node about the models it runs and what its catalog says of both (after the soak: they must agree with the processes). */
async function statusLines(m: Mesh): Promise<string[]> {
  const lines: string[] = [];
  for (const [label, n] of [["A", m.a], ["C", m.c]] as const) {
    try {
      const runs = (await loaded(n)).map((s) => `${s.model_name} (${s.state}, pid ${s.pid}, rpc workers ${((s as { rpc_workers?: string[] }).rpc_workers ?? []).length})`);
      const list = (await (await fetch(`${n.url}/v1/models`, { signal: AbortSignal.timeout(10_000) })).json()) as { data: { id: string; status?: string }[] };
      const says = list.data.filter((x) => x.id === m.wide || x.id === m.tiny).map((x) => `${x.id}: ${x.status ?? "?"}`);
      lines.push(`${label} runs ${runs.join(", ") || "nothing"}; its catalog says ${says.join(", ")}`);
    } catch (err) {
      lines.push(`${label}: status unreadable (${(err as Error).message})`);
    }
  }
  return lines;
}

let exitCode = 0;
try {
  if (values.loopback) places = loopbackPlaces();
  else {
    const chosen = await labOrLoopback(0);
    places = chosen.places;
    if (chosen.why) console.log(`soak: the lab cannot run here (${chosen.why}); falling back to loopback nodes`);
  }
  const m = await startMesh(places);
  const targets: SoakTarget[] = Array.from({ length: CLIENTS }, (_, i) => {
    const entry = (i >> 1) % 2 === 0 ? m.a : m.c;
    return { model: i % 2 === 0 ? m.wide : m.tiny, entry: entry === m.a ? "A" : "C", url: entry.url };
  });

  step(`${CLIENTS} clients for ${SECONDS} s; B is killed at ${SECONDS / 2} s`);
  const t0 = performance.now();
  const clock = () => performance.now() - t0;
  const endAt = SECONDS * 1000;
  const rss = sampleRss({ "A (host of wide)": m.a.child.proc.pid, "B (wide's rpc worker, killed)": m.b.child.proc.pid, "C (host of tiny)": m.c.child.proc.pid }, Math.max(1000, endAt / 30), clock);
  const records: RequestRecord[] = [];
  let started = 0;
  let killAt = Number.POSITIVE_INFINITY;
  const killing = Bun.sleep(endAt / 2).then(async () => {
    killAt = clock();
    await places!.kill(m.b);
  });
  const loops = targets.map((t) =>
    clientLoop(t, { maxTokens: TOKENS, deadlineMs: DEADLINE_MS, running: () => clock() < endAt, clock, started: () => started++, sink: (r) => records.push(r) }),
  );
  // The series covers the run itself, not the drain after it (memory falls as the last requests end).
  const sampled = Bun.sleep(endAt).then(() => rss.stop());
  // Each request ends by its own deadline; this one only guards against a bug in the bench itself.
  await withDeadline(Promise.all([killing, ...loops]), endAt + DEADLINE_MS + 30_000, "every client to finish its last request");
  const series = await sampled;

  const wallS = clock() / 1000;
  console.log(
    `\nsoak: ${CLIENTS} streaming clients × ${SECONDS} s (${wallS.toFixed(0)} s until the last request ended), ${TOKENS} tokens per request, deadline ${DEADLINE_MS / 1000} s per request; ${places.label}`,
  );
  const mib = (b: number) => `${(b / 2 ** 20).toFixed(0)} MiB`;
  console.log(`models: ${m.wide} (needs ${mib(m.wideNeed)} at ctx ${CTX}) split over A (host) + B (rpc worker), each offering ${mib(m.offer)} by --vram; ${m.tiny} on C alone`);
  console.log(`clients call A's and C's APIs (half each, both models: every other request is forwarded over the mesh); B got kill -9 at ${(killAt / 1000).toFixed(1)} s`);
  console.log(`llama.cpp: 1 thread per process, --parallel ${PARALLEL} slots per llama-server (more slots: fewer requests queued inside llama-server; each slot ${CTX / PARALLEL} tokens of context)${LLAMA_EXTRA ? `; also ${LLAMA_EXTRA}` : ""}\n`);
  printTable(PHASE_HEADER, phaseRows(records, killAt, [m.wide, m.tiny]));
  for (const line of errorMessages(records)) console.log(`first error of its kind: ${line}`);

  const count = (k: RequestRecord["outcome"]["kind"]) => records.filter((r) => r.outcome.kind === k).length;
  const [done, clean, unclean, hangs] = [count("completed"), count("error"), count("unclean"), count("hang")];
  const accounted = started === done + clean + unclean + hangs;
  console.log(`\nstarted ${started} = completed ${done} + clean errors ${clean} + unclean ends ${unclean} + hangs ${hangs}: ${accounted ? "every request accounted for" : "REQUESTS LOST"}`);
  if (!accounted) exitCode = 1;

  console.log(`\nRSS of each node (sampled every ${(Math.max(1000, endAt / 30) / 1000).toFixed(0)} s over the run, 8 points shown; second half = ${SECONDS / 2} s to ${SECONDS} s, spread = (max - min) / min):\n`);
  printTable(RSS_HEADER, rssRows(series, endAt / 2));
  console.log("");
  for (const line of await statusLines(m)) console.log(`after the soak: ${line}`);
  if (values["logs-dir"]) {
    mkdirSync(values["logs-dir"], { recursive: true });
    for (const [label, n] of [["A", m.a], ["B", m.b], ["C", m.c]] as const) writeFileSync(join(values["logs-dir"], `${label}.log`), n.child.output());
    console.log(`node logs in ${values["logs-dir"]}`);
  }
} catch (err) {
  exitCode = 1;
  console.error(`bench soak: ${err instanceof Error ? err.message : String(err)}`);
} finally {
  await cleanup();
}
process.exit(exitCode);
