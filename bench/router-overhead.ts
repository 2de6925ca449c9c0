#!/usr/bin/env bun
/**
 * What the node's router adds on top of llama-server, measured in one run against the same
 * llama-server process (the node's own wrapped server, called directly at its backend_url):
 * latency of small non-streaming requests, time to the first streamed byte, requests/s with 16
 * concurrent clients, the router's CPU per request (a small whole answer, and a streamed one of 32
 * tokens: what each chunk's way through the router costs) beside that of a bare Bun proxy
 * (`harness/bare-proxy.ts`: the floor any router in Bun starts from on this machine) and of the
 * same proxy doing only the duties every router of ours has (`--duties`), and an
 * auto-load through the API against a bare llama-server start.
 *
 *   bun bench/router-overhead.ts [--requests 400] [--concurrency 16] [--seconds 6] [--warm 12] [--pin] [--cpu-prof DIR]
 *
 * `--warm` seconds of load go to the router first, until the JIT has compiled its request path.
 *
 * `--pin` gives llama-server a core of its own (the last) and the client and router the others,
 * as on a machine whose model runs on an accelerator: what the router costs then is latency and
 * its own core's time, not the model's. Without it all three share every core.
 *
 * `--cpu-prof DIR` runs the node under Bun's profiler and leaves its profile (markdown) in DIR when
 * the node stops: where the router's CPU per request goes (the profiler adds to that figure).
 *
 * Goals: added p50 <= 1 ms, p99 <= 5 ms; throughput >= 95% of direct; auto-load <= 100 ms over bare.
 * Everything runs on loopback; counts and durations are bounded by the flags.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { freePort } from "../pool/free-port.ts";
import { CHILD_KEY_FILE } from "../pool/child-key.ts";
import { pct, printTable } from "./report.ts";
import { provideDevLlama } from "../scripts/llama-dev.ts";
import { killAllChildren, spawnChild } from "../harness/children.ts";
import { testModel } from "../harness/models.ts";
import { startNode } from "../harness/node.ts";
import { waitFor } from "../harness/wait.ts";

const { values } = parseArgs({
  options: {
    requests: { type: "string", default: "400" },
    concurrency: { type: "string", default: "16" },
    seconds: { type: "string", default: "6" },
    loads: { type: "string", default: "5" },
    warm: { type: "string", default: "12" },
    pin: { type: "boolean", default: false },
    "cpu-prof": { type: "string" },
  },
});
const REQUESTS = Number(values.requests);
const CONCURRENCY = Number(values.concurrency);
const SECONDS = Number(values.seconds);
const LOADS = Number(values.loads);
const WARM_S = Number(values.warm);
const LLAMA_ARGS = "--threads 1 --threads-batch 1 --parallel 4";
/** The CPUs this process may run on (a container's cpuset, not always 0..N-1). */
function allowedCpus(): number[] {
  const list = /Cpus_allowed_list:\s*(\S+)/.exec(readFileSync("/proc/self/status", "utf8"))?.[1] ?? "";
  return list.split(",").flatMap((part) => {
    const [a, b] = part.split("-").map(Number);
    return b === undefined ? [a!] : Array.from({ length: b - a! + 1 }, (_, i) => a! + i);
  });
}
const CPUS = allowedCpus();
const CORES = CPUS.length;
const PIN = values.pin && CORES >= 2;
if (values.pin && !PIN) console.error("--pin needs 2 cores or more: every process shares the one core");

/** Moves every thread of `pid` onto `cpus` (a taskset list such as "0" or "0-2"). */
function pin(pid: number, cpus: string): void {
  const r = Bun.spawnSync(["taskset", "-a", "-cp", cpus, String(pid)], { stdout: "ignore", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`taskset ${cpus} ${pid}: ${r.stderr.toString().trim()}`);
}
const routerCores = CPUS.slice(0, -1).join(",");
const llamaCore = String(CPUS[CPUS.length - 1]);

const llama = await provideDevLlama();
process.env.MESH_LLAMA_DIR = llama.dir;
const model = await testModel("tiny", "q8_0");

const small = JSON.stringify({ model: "tiny-q8_0", prompt: "hello", max_tokens: 1, temperature: 0 });
const generate32 = JSON.stringify({ model: "tiny-q8_0", prompt: "hello", max_tokens: 32, temperature: 0, ignore_eos: true });
const streamed32 = JSON.stringify({ model: "tiny-q8_0", prompt: "hello", max_tokens: 32, temperature: 0, stream: true, ignore_eos: true });
const streamed = JSON.stringify({ model: "tiny-q8_0", prompt: "hello", max_tokens: 4, temperature: 0, stream: true, ignore_eos: true });

/** The node's child answers to the node's key only (pool/child-key.ts): the bench reads it as the node's user. */
const childAuth = new Map<string, Record<string, string>>();
const headersFor = (url: string) => ({ ...childAuth.get(url), "content-type": "application/json" });

async function timed(url: string, body: string): Promise<number> {
  const t = performance.now();
  // llama-server closes kept-alive connections on its own schedule: a request sent on one it just
  // closed is reset unread (as the proxy does, once more on a fresh connection).
  const send = (keepalive: boolean) => fetch(`${url}/v1/completions`, { method: "POST", headers: headersFor(url), body, keepalive });
  const res = await send(true).catch((err: unknown) => {
    if ((err as { code?: string }).code !== "ECONNRESET") throw err;
    return send(false);
  });
  await res.arrayBuffer();
  if (res.status !== 200) throw new Error(`${url}: ${res.status}`);
  return performance.now() - t;
}

async function firstByte(url: string): Promise<number> {
  const t = performance.now();
  const res = await fetch(`${url}/v1/completions`, { method: "POST", headers: headersFor(url), body: streamed });
  const reader = res.body!.getReader();
  await reader.read();
  const ms = performance.now() - t;
  while (!(await reader.read()).done);
  return ms;
}

async function window(url: string, body: string, seconds: number): Promise<number> {
  const deadline = performance.now() + seconds * 1000;
  let done = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < deadline) {
        await timed(url, body);
        done++;
      }
    }),
  );
  return done / seconds;
}

/** CPU seconds a process has used (Linux). */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Requests/s with CONCURRENCY clients, direct and routed in alternating 1 s windows (medians). */
async function throughput(direct: string, routed: string, body: string) {
  const d: number[] = [];
  const r: number[] = [];
  for (let i = 0; i < SECONDS; i++) {
    d.push(await window(direct, body, 1));
    r.push(await window(routed, body, 1));
  }
  return { direct: pct(d, 50), routed: pct(r, 50) };
}

/**
 * CPU per request of each side (the router, the bare proxy, the proxy with a router's duties), in
 * alternating 1 s windows of the same load, so drift on a shared machine (another tenant, a slower
 * minute) hits them all alike.
 */
async function cpuBeside(sides: readonly { url: string; pid: number }[], body: string): Promise<number[]> {
  const measured = sides.map((side) => ({ ...side, cpu: 0, requests: 0 }));
  for (let i = 0; i < SECONDS; i++) {
    for (const side of measured) {
      const before = cpuSeconds(side.pid);
      side.requests += await window(side.url, body, 1);
      side.cpu += cpuSeconds(side.pid) - before;
    }
  }
  return measured.map((side) => (side.cpu / side.requests) * 1000);
}

/** Alternates direct and routed requests so drift on a shared machine hits both alike. */
async function paired(direct: string, routed: string, n: number, one: (url: string) => Promise<number>) {
  const d: number[] = [];
  const r: number[] = [];
  for (let i = 0; i < n; i++) {
    d.push(await one(direct));
    r.push(await one(routed));
  }
  return { d, r };
}

async function bareStart(): Promise<number> {
  const port = freePort();
  const t = performance.now();
  const child = spawnChild("llama-server", [llama.llamaServer, "-m", model, "--host", "127.0.0.1", "--port", String(port), "--ctx-size", "4096", ...LLAMA_ARGS.split(" ")]);
  await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/health`)).status === 200, { what: "bare llama-server", intervalMs: 2 });
  const ms = performance.now() - t;
  await child.stop();
  return ms;
}

const modelsDir = mkdtempSync(join(tmpdir(), "mesh-bench-"));
try {
  const profileDir = values["cpu-prof"];
  const profiled = profileDir ? { command: [process.execPath, "--cpu-prof-md", "--cpu-prof-dir", profileDir, join(import.meta.dir, "..", "main.ts")] } : {};
  const node = await startNode(["--llamacpp-args", LLAMA_ARGS, "--model", model], profiled);
  const routed = node.url;
  await waitFor(async () => (await fetch(`${routed}/api/v1/health`).then((r) => r.json()) as { all_models_loaded: unknown[] }).all_models_loaded.length > 0, {
    what: "the model to load",
  });

  // Auto-load: first request for an unloaded model, minus a warm request; against a bare start.
  const autoLoads: number[] = [];
  const bareStarts: number[] = [];
  for (let i = 0; i < LOADS; i++) {
    await fetch(`${routed}/api/v1/unload`, { method: "POST", headers: { "content-type": "application/json" } });
    const cold = await timed(routed, small);
    const warm = await timed(routed, small);
    autoLoads.push(cold - warm);
    bareStarts.push(await bareStart());
  }

  const health = (await (await fetch(`${routed}/api/v1/health`)).json()) as { all_models_loaded: { backend_url: string; pid: number }[] };
  const direct = health.all_models_loaded[0]!.backend_url;
  childAuth.set(direct, { authorization: `Bearer ${readFileSync(join(node.stateDir, CHILD_KEY_FILE), "utf8").trim()}` });
  const proxy = async (name: string, ...args: string[]) => {
    const child = spawnChild(name, [process.execPath, join(import.meta.dir, "..", "harness", "bare-proxy.ts"), direct, ...args]);
    const url = (await child.waitForOutput(/^(http:\/\/127\.0\.0\.1:\d+)$/m))[1]!;
    childAuth.set(url, childAuth.get(direct)!);
    return { url, pid: child.proc.pid };
  };
  const bareSide = await proxy("bare-proxy");
  const dutiesSide = await proxy("duties-proxy", "--duties");
  const bare = bareSide.url;
  if (PIN) {
    pin(process.pid, routerCores);
    pin(node.child.proc.pid, routerCores);
    pin(bareSide.pid, routerCores);
    pin(dutiesSide.pid, routerCores);
    pin(health.all_models_loaded[0]!.pid, llamaCore);
  }
  for (let i = 0; i < 20; i++) await Promise.all([timed(direct, small), timed(routed, small), timed(bare, small), timed(dutiesSide.url, small)]);
  // The JIT keeps compiling the node's request path for about 10 s of load (measured: its compiler
  // thread's time levels off there, and the CPU per request falls by a fifth): a node serves for
  // hours, so its steady state is what is measured, both kinds of answer.
  const warmUntil = performance.now() + WARM_S * 1000;
  while (performance.now() < warmUntil) {
    await window(routed, small, 1);
    await window(routed, streamed32, 1);
    await window(bare, small, 0.2);
    await window(dutiesSide.url, small, 0.2);
    await window(dutiesSide.url, streamed32, 0.2);
  }

  const lat = await paired(direct, routed, REQUESTS, (u) => timed(u, small));
  const ttfb = await paired(direct, routed, Math.max(50, REQUESTS / 4), firstByte);
  const tiny1 = await throughput(direct, routed, small);
  const gen32 = await throughput(direct, routed, generate32);
  const sides = [{ url: routed, pid: node.child.proc.pid }, bareSide, dutiesSide];
  const [mesh1, bare1, duties1] = (await cpuBeside(sides, small)) as [number, number, number];
  const [meshSse, bareSse, dutiesSse] = (await cpuBeside(sides, streamed32)) as [number, number, number];
  await node.stop();

  const f = (x: number) => x.toFixed(2);
  const rows: [string, string, string, string, string][] = [
    ["small request p50 (ms)", f(pct(lat.d, 50)), f(pct(lat.r, 50)), f(pct(lat.r, 50) - pct(lat.d, 50)), "<= 1 ms added"],
    ["small request p99 (ms)", f(pct(lat.d, 99)), f(pct(lat.r, 99)), f(pct(lat.r, 99) - pct(lat.d, 99)), "<= 5 ms added"],
    ["first streamed byte p50 (ms)", f(pct(ttfb.d, 50)), f(pct(ttfb.r, 50)), f(pct(ttfb.r, 50) - pct(ttfb.d, 50)), ""],
    [`requests/s, ${CONCURRENCY} clients, 1 token`, tiny1.direct.toFixed(0), tiny1.routed.toFixed(0), `${((tiny1.routed / tiny1.direct) * 100).toFixed(1)}%`, ">= 95% of direct"],
    [`requests/s, ${CONCURRENCY} clients, 32 tokens`, gen32.direct.toFixed(0), gen32.routed.toFixed(0), `${((gen32.routed / gen32.direct) * 100).toFixed(1)}%`, ">= 95% of direct"],
    ["router CPU per request (ms): bare Bun proxy vs mesh", f(bare1), f(mesh1), `${(mesh1 / bare1).toFixed(2)}x`, "<= 1.5x bare"],
    ["  the same: a proxy with a router's duties vs mesh", `${f(duties1)} (${(duties1 / bare1).toFixed(2)}x bare)`, f(mesh1), `${(mesh1 / duties1).toFixed(2)}x`, ""],
    ["router CPU per streamed request, 32 tokens (ms): bare vs mesh", f(bareSse), f(meshSse), `${(meshSse / bareSse).toFixed(2)}x`, "<= 1.25x bare"],
    ["  the same: a proxy with a router's duties vs mesh", `${f(dutiesSse)} (${(dutiesSse / bareSse).toFixed(2)}x bare)`, f(meshSse), `${(meshSse / dutiesSse).toFixed(2)}x`, ""],
    ["model start p50 (ms): bare vs auto-load", f(pct(bareStarts, 50)), f(pct(autoLoads, 50)), f(pct(autoLoads, 50) - pct(bareStarts, 50)), "<= 100 ms added"],
  ];
  const header: [string, string, string, string, string] = ["measure", "direct", "via mesh", "added", "goal"];
  printTable(header, rows);
  console.log(`\n${REQUESTS} paired small requests, ${ttfb.d.length} paired streams, ${SECONDS} alternating 1 s windows per throughput side (medians) and per CPU side (mesh beside the bare proxy and the proxy with a router's duties, harness/bare-proxy.ts --duties), ${LOADS} loads; llama-server ${LLAMA_ARGS}; ${PIN ? `llama-server alone on core ${llamaCore}, client and router on ${routerCores}` : `${CORES} cores shared by client, router and llama-server`}`);
} finally {
  await killAllChildren();
  rmSync(modelsDir, { recursive: true, force: true });
}
