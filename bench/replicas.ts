#!/usr/bin/env bun
/**
 * Serving one model at scale across two nodes, each pinned to its own CPU core (taskset) so that
 * two nodes behave as two machines, in the lab's network namespaces where it can run:
 *
 *  1. throughput: `clients` concurrent streaming clients of A for `seconds`, with one server (the
 *     mesh's replicas off) and then with the replica the mesh adds on B when A's queue fills;
 *  2. affinity: multi-turn chats that each open with their own long system prompt, through A, with
 *     two servers and `--affinity on` vs `off`: time to first token and prompt tokens reused from
 *     the KV cache (`timings.cache_n`) of every turn after the first;
 *  3. queue: a burst of 3x a server's slots, with a small `--max-queue` and with the default: every
 *     request answered 200 or 429, none lost;
 *  4. retry: B (a server of the model) killed, then requests sent at once through A with users that
 *     B ranks first: each gets one answer, from A.
 *
 *   bun bench/replicas.ts [--clients 16] [--seconds 20] [--tokens 32] [--chats 8] [--turns 4] [--loopback]
 *
 * Tables are printed, never judged; the exit code is 1 only when a phase could not run or a
 * request of the queue or retry phases went unanswered.
 */
import { mkdtempSync, rmSync, copyFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { provideDevLlama } from "../scripts/llama-dev.ts";
import { killAllChildren } from "../harness/children.ts";
import { waitForFullMesh } from "../harness/mesh.ts";
import { testModel } from "../harness/models.ts";
import { meshCommand } from "../harness/node.ts";
import { waitFor } from "../harness/wait.ts";
import { labOrLoopback, loopbackPlaces, type PlacedNode, type Places } from "./places.ts";
import { pct, printTable } from "./report.ts";
import { answeredBy, closedLoops, forSeconds, streamChat, type ChatMessage, type Reply } from "./replica-client.ts";
import { step, watchdog } from "./watchdog.ts";

const { values } = parseArgs({
  options: {
    clients: { type: "string", default: "16" },
    seconds: { type: "string", default: "20" },
    tokens: { type: "string", default: "32" },
    chats: { type: "string", default: "8" },
    turns: { type: "string", default: "4" },
    parallel: { type: "string", default: "4" },
    loopback: { type: "boolean", default: false },
    "limit-minutes": { type: "string", default: "20" },
  },
});
const CLIENTS = Number(values.clients);
const SECONDS = Number(values.seconds);
const TOKENS = Number(values.tokens);
const CHATS = Number(values.chats);
const TURNS = Number(values.turns);
const PARALLEL = Number(values.parallel);
const DEADLINE_MS = 60_000;
const CTX_PER_SLOT = 2048;
/** Prompt tokens taken from the cache that make a turn a cache hit (its chat's system prompt is ~500). */
const HIT_TOKENS = 256;

process.env.MESH_LLAMA_DIR = (await provideDevLlama()).dir;
const llamaArgs = (parallel: number) => ["--ctx-size", String(CTX_PER_SLOT * parallel), "--llamacpp-args", `--threads 1 --threads-batch 1 --parallel ${parallel}`, "--rpc-threads", "1"];

/** Every setup gets fresh places (a lab's namespaces go with its close). */
let places: Places | undefined;
let placesWhy: string | undefined;
async function closePlaces(): Promise<void> {
  const open = places;
  places = undefined;
  await open?.close();
}
async function freshPlaces(): Promise<Places> {
  await closePlaces();
  if (values.loopback) places = loopbackPlaces();
  else {
    const chosen = await labOrLoopback(0);
    places = chosen.places;
    placesWhy = chosen.why;
  }
  return places;
}
const modelsDir = mkdtempSync(join(tmpdir(), "mesh-bench-replicas-"));
const cleanup = async () => {
  await closePlaces().catch((err: unknown) => console.error(`cleanup: ${String(err)}`));
  await killAllChildren();
  rmSync(modelsDir, { recursive: true, force: true });
};
watchdog(Number(values["limit-minutes"]) * 60_000, cleanup);

// `wide` (feed-forward tensors over 10 MiB) makes each token cost real compute, so a second core serving it shows.
const modelPath = await testModel("wide", "q8_0");
const MODEL = modelPath.split("/").pop()!.replace(/\.gguf$/, "");
copyFileSync(modelPath, join(modelsDir, `${MODEL}.gguf`));

interface Pair {
  a: PlacedNode;
  b: PlacedNode;
  names: Map<string, string>;
}

/** A (core 0) hosts the model, B (core 1) has its file and joins; both with `args`. */
async function startPair(args: string[], parallel = PARALLEL): Promise<Pair> {
  const p = await freshPlaces();
  const pinned = (core: number) => ({ command: ["taskset", "-c", String(core), ...meshCommand()] });
  const common = [...llamaArgs(parallel), "--models-dir", modelsDir, ...args];
  const a = await p.start([...common, "--model", MODEL], { name: "A", ...pinned(0) });
  const b = await p.start([...common, "--join", a.token], { name: "B", ...pinned(1) });
  await waitForFullMesh([a, b], 60_000);
  const one = () => hello(a.url, 2);
  await waitFor(async () => (await one()).failure === undefined, { what: `${MODEL} to answer through A`, timeoutMs: 120_000 });
  return { a, b, names: new Map([[a.nodeId, "A"], [b.nodeId, "B"]]) };
}

async function servers(n: PlacedNode): Promise<string[]> {
  const res = await fetch(`${n.url}/v1/models/${MODEL}`, { signal: AbortSignal.timeout(10_000) });
  return ((await res.json()) as { mesh?: { servers?: string[] } }).mesh?.servers ?? [];
}

/** The plain request of the throughput, queue and retry phases. */
const hello = (url: string, maxTokens = TOKENS, user?: string) => streamChat({ url, model: MODEL, messages: [{ role: "user", content: "hello" }], maxTokens, deadlineMs: DEADLINE_MS, ...(user !== undefined ? { user } : {}) });

/** Requests through A until the mesh has added a replica on B (A's queue filled), then none. */
async function withReplica(pair: Pair): Promise<void> {
  step("load until the mesh adds a replica on B");
  let warming = true;
  const warm = closedLoops(CLIENTS, () => warming, () => hello(pair.a.url));
  try {
    await waitFor(async () => (await servers(pair.a)).length >= 2, { what: "a replica of the model on B", timeoutMs: 120_000 });
  } finally {
    warming = false;
    await warm;
  }
}

const ms = (x: number) => x.toFixed(0);
const ok = (r: Reply) => r.status === 200 && r.failure === undefined;

function throughputRow(label: string, replies: Reply[], pair: Pair, serverCount: number): string[] {
  const done = replies.filter(ok);
  const lat = done.map((r) => r.totalMs);
  const ttft = done.flatMap((r) => (r.ttftMs === undefined ? [] : [r.ttftMs]));
  return [label, String(serverCount), String(done.length), (done.length / SECONDS).toFixed(2), ((done.length * TOKENS) / SECONDS).toFixed(0), ms(pct(lat, 50)), ms(pct(lat, 99)), ms(pct(ttft, 50)), String(replies.length - done.length), answeredBy(done, pair.names)];
}

async function throughput(): Promise<void> {
  const rows: string[][] = [];
  for (const replicas of ["off", "on"] as const) {
    step(`throughput with replicas ${replicas}`);
    const pair = await startPair(["--replicas", replicas]);
    if (replicas === "on") {
      await withReplica(pair);
    }
    const count = (await servers(pair.a)).length;
    rows.push(throughputRow(replicas === "off" ? "one server (replicas off)" : "host + replica (replicas on)", await closedLoops(CLIENTS, forSeconds(SECONDS), () => hello(pair.a.url)), pair, count));
    await closePlaces();
  }
  console.log(`\n### Throughput: ${CLIENTS} concurrent streaming clients of A, ${TOKENS} tokens each, ${SECONDS} s, ${PARALLEL} slots per server\n`);
  printTable(["setup", "servers", "answered", "req/s", "tok/s", "p50 ms", "p99 ms", "TTFT p50 ms", "failed", "answered by"], rows);
  const [one, two] = rows.map((r) => Number(r[3]));
  if (one && two) console.log(`\nspeed-up with a replica: ${(two / one).toFixed(2)}x (goal 1.8x)`);
}

/** A system prompt of its own for each chat, long enough that reusing it from the cache shows. */
const systemPrompt = (chat: number) => `You are assistant number ${chat}. ` + Array.from({ length: 30 }, (_, i) => `Rule ${i + 1} of chat ${chat}: answer briefly and stay on topic ${chat * 31 + i}.`).join(" ");

async function affinity(): Promise<void> {
  const rows: string[][] = [];
  for (const mode of ["on", "off"] as const) {
    step(`affinity ${mode}`);
    const pair = await startPair(["--affinity", mode]);
    await withReplica(pair);
    const later: Reply[] = [];
    let moved = 0;
    // Half the chats at a time, so each server has about one chat per slot and caches hold.
    const run = async (chat: number) => {
      const messages: ChatMessage[] = [{ role: "system", content: systemPrompt(chat) }];
      let last: string | undefined;
      for (let turn = 1; turn <= TURNS; turn++) {
        messages.push({ role: "user", content: `Turn ${turn}: tell me something about ${chat + turn}.` });
        const reply = await streamChat({ url: pair.a.url, model: MODEL, messages, maxTokens: 8, deadlineMs: DEADLINE_MS });
        if (!ok(reply)) throw new Error(`chat ${chat} turn ${turn}: ${reply.failure}`);
        if (turn > 1) {
          later.push(reply);
          if (reply.answeredBy !== last) moved++;
        }
        last = reply.answeredBy;
        messages.push({ role: "assistant", content: reply.text });
      }
    };
    for (let first = 0; first < CHATS; first += Math.max(1, PARALLEL)) await Promise.all(Array.from({ length: Math.min(PARALLEL, CHATS - first) }, (_, i) => run(first + i)));
    const ttft = later.flatMap((r) => (r.ttftMs === undefined ? [] : [r.ttftMs]));
    const cached = later.flatMap((r) => (r.cacheN === undefined ? [] : [r.cacheN]));
    const mean = (xs: number[]) => (xs.length ? xs.reduce((s, x) => s + x, 0) / xs.length : NaN);
    // A turn on a server that never saw its chat still reuses the template's first few tokens: a hit is most of the system prompt.
    rows.push([mode, String(later.length), String(moved), ms(mean(ttft)), ms(pct(ttft, 50)), ms(pct(ttft, 90)), cached.length ? mean(cached).toFixed(0) : "not reported", String(cached.filter((c) => c >= HIT_TOKENS).length), answeredBy(later, pair.names)]);
    await closePlaces();
  }
  console.log(`\n### Affinity: ${CHATS} chats of ${TURNS} turns through A, each opening with its own ~500-token system prompt, two servers; turns 2..${TURNS}\n`);
  printTable(["affinity", "turns", "moved server", "TTFT mean ms", "TTFT p50 ms", "TTFT p90 ms", "mean cache_n", `turns with cache_n >= ${HIT_TOKENS}`, "answered by"], rows);
}

async function queue(): Promise<boolean> {
  const slots = 2;
  const rows: string[][] = [];
  let none_lost = true;
  for (const maxQueue of [2, 64]) {
    step(`queue burst with --max-queue ${maxQueue}`);
    const a = await (await freshPlaces()).start([...llamaArgs(slots), "--models-dir", modelsDir, "--model", MODEL, "--max-queue", String(maxQueue)], { name: "A", command: ["taskset", "-c", "0", ...meshCommand()] });
    await waitFor(async () => ok(await hello(a.url, 2)), { what: "the model to answer", timeoutMs: 120_000 });
    const burst = await Promise.all(Array.from({ length: 3 * slots }, () => hello(a.url)));
    const answered = burst.filter(ok).length;
    const refused = burst.filter((r) => r.status === 429).length;
    const other = burst.length - answered - refused;
    if (other > 0) none_lost = false;
    const ttft = burst.filter(ok).flatMap((r) => (r.ttftMs === undefined ? [] : [r.ttftMs]));
    rows.push([String(maxQueue), String(burst.length), String(answered), String(refused), String(other), ttft.length ? ms(Math.max(...ttft)) : "-"]);
    await closePlaces();
  }
  console.log(`\n### Queue: a burst of 3x the slots (${slots}) of one server\n`);
  printTable(["--max-queue", "sent", "200", "429", "other (lost)", "longest TTFT ms"], rows);
  return none_lost;
}

async function retry(): Promise<boolean> {
  step("retry: B killed before its first byte");
  const pair = await startPair([]);
  await withReplica(pair);
  // Users whose affinity puts them on B: asked of A while both serve (one answer each tells whose they are).
  const onB: string[] = [];
  for (let i = 0; onB.length < 8 && i < 64; i++) {
    const r = await hello(pair.a.url, 1, `user-${i}`);
    if (r.answeredBy === pair.b.nodeId) onB.push(`user-${i}`);
  }
  await places!.kill(pair.b);
  const replies = await Promise.all(onB.map((user) => hello(pair.a.url, TOKENS, user)));
  await closePlaces();
  const answered = replies.filter(ok);
  console.log("\n### Retry: B killed (kill -9), then requests at once through A from users that B served\n");
  printTable(
    ["sent", "answered 200", "by A", "retried (x-mesh-retried-from B)", "failed", "slowest ms"],
    [[String(replies.length), String(answered.length), String(answered.filter((r) => r.answeredBy === pair.a.nodeId).length), String(replies.filter((r) => r.retriedFrom === pair.b.nodeId).length), String(replies.length - answered.length), ms(Math.max(0, ...replies.map((r) => r.totalMs)))]],
  );
  return answered.length === replies.length;
}

let exitCode = 0;
try {
  const where = await freshPlaces();
  if (placesWhy) console.log(`replicas: the lab cannot run here (${placesWhy}); falling back to loopback nodes`);
  console.log(`where: ${where.label}; node A on CPU core 0, node B on core 1 (taskset); model ${MODEL}`);
  await throughput();
  await affinity();
  if (!(await queue())) exitCode = 1;
  if (!(await retry())) exitCode = 1;
} catch (err) {
  console.error(`replicas: ${(err as Error).stack ?? String(err)}`);
  exitCode = 1;
} finally {
  await cleanup();
}
process.exit(exitCode);
