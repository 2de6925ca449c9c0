#!/usr/bin/env bun
/**
 * The RPC tunnel against plain TCP, in one run:
 * 1. one connection's throughput and a 100-byte round trip, through our pump over iroh QUIC
 *    (the same `socketToQuic`/`quicToSocket` the tunnels use; far end its own process) vs straight TCP;
 * 2. generation tokens/s of a model split over three rpc-servers, through the mesh (host + two
 *    workers, real nodes) vs llama-server connected straight to three plain rpc-servers;
 * 3. load bytes and time of the `wide` model across the mesh, with and without zero-transfer.
 *
 *   bun bench/tunnel.ts [--mib 512] [--pings 2000] [--tokens 128] [--rounds 5] [--lab] [--mbit 1000]
 *
 * On loopback; with `--lab` the same again with every node in its own network namespace of the lab
 * (harness/lab/lab.ts), each link capped at `--mbit` Mbit/s, and a second table (skipped, with the
 * reason, where the lab cannot run). Goals: tunnel >= 300 MB/s on loopback; tokens/s through the
 * mesh >= 90% of direct; zero-transfer load bytes <= 5% of the workers' share. Every wait has a
 * deadline and the whole run a watchdog; every process and namespace is removed at the end.
 */
import { parseArgs } from "node:util";
import { provideDevLlama } from "../scripts/llama-dev.ts";
import { killAllChildren } from "../harness/children.ts";
import { testModel } from "../harness/models.ts";
import { labUnavailable } from "../harness/lab/lab.ts";
import { labPlaces, loopbackPlaces, type Places } from "./places.ts";
import { pct, printTable } from "./report.ts";
import { directSplit, generate, HOST_SHARE, meshSplit, WORKER_SHARE, type MeshSetup, type Setup } from "./split-setups.ts";
import { roundTrips, startFarEnd, throughput, tunnelTo } from "./tunnel-pair.ts";
import { step, watchdog } from "./watchdog.ts";

const { values } = parseArgs({
  options: {
    mib: { type: "string", default: "512" },
    pings: { type: "string", default: "2000" },
    tokens: { type: "string", default: "128" },
    rounds: { type: "string", default: "5" },
    lab: { type: "boolean", default: false },
    mbit: { type: "string", default: "1000" },
    "limit-minutes": { type: "string", default: "30" },
  },
});
const MIB = Number(values.mib);
const PINGS = Number(values.pings);
const TOKENS = Number(values.tokens);
const ROUNDS = Number(values.rounds);
const MBIT = Number(values.mbit);

const llama = await provideDevLlama();
process.env.MESH_LLAMA_DIR = llama.dir;
const LLAMA_ARGS = ["--ctx-size", "512", "--llamacpp-args", "--threads 1", "--rpc-threads", "1"];

const open = new Set<Places>();
const cleanup = async () => {
  await Promise.all([...open].map((p) => p.close().catch((err: unknown) => console.error(`cleanup: ${String(err)}`))));
  await killAllChildren();
};
watchdog(Number(values["limit-minutes"]) * 60_000, cleanup);

/** Median tokens/s of each setup, measured in alternation so drift on a shared machine hits all alike. */
async function alternate(setups: Setup[]): Promise<number[]> {
  for (const s of setups) await generate(s, TOKENS);
  const samples = setups.map(() => [] as number[]);
  for (let r = 0; r < ROUNDS; r++) for (const [i, s] of setups.entries()) samples[i]!.push(await generate(s, TOKENS));
  return samples.map((xs) => pct(xs, 50));
}

async function measure(places: Places): Promise<string[][]> {
  const tiny = await testModel("tiny", "q8_0");
  const wide = await testModel("wide", "q8_0");

  step("tiny: splits through the mesh (direct TLS path, QUIC only) and straight");
  const tinyTls = await meshSplit(places, LLAMA_ARGS, tiny, false, "on");
  const tinyQuic = await meshSplit(places, LLAMA_ARGS, tiny, false, "off");
  const tinyDirect = await directSplit(places, llama, tiny, tinyTls.nodes);

  step("one connection: plain TCP vs the tunnel");
  // The far end beside a worker: in the lab its bytes cross that worker's capped link, as RPC does.
  const farNode = tinyTls.nodes[0]!;
  const { far, child: farChild } = await startFarEnd((argv) => places.beside(farNode, "tunnel-far", argv), farNode.address);
  const sinkTunnel = await tunnelTo(far.sinkAddr, places.benchAddress);
  const echoTunnel = await tunnelTo(far.echoAddr, places.benchAddress);
  const viaTunnel = (port: number) => ({ host: "127.0.0.1", port });
  const mbDirect = await throughput({ host: farNode.address, port: far.sink }, MIB);
  const mbTunnel = await throughput(viaTunnel(sinkTunnel.port), MIB);
  const rttDirect = await roundTrips({ host: farNode.address, port: far.echo }, PINGS);
  const rttTunnel = await roundTrips(viaTunnel(echoTunnel.port), PINGS);
  await Promise.all([sinkTunnel.close(), echoTunnel.close(), farChild.stop()]);

  step("tiny: tokens/s, setups alternating");
  const [tpsDirect, tpsTls, tpsQuic] = (await alternate([tinyDirect, tinyTls, tinyQuic])) as [number, number, number];
  for (const s of [tinyDirect, tinyTls, tinyQuic]) await s.stop();

  step("wide: splits with zero-transfer (direct TLS path, QUIC only) and straight");
  const withZero = await meshSplit(places, LLAMA_ARGS, wide, true, "on");
  const wideQuic = await meshSplit(places, LLAMA_ARGS, wide, true, "off");
  const wideDirect = await directSplit(places, llama, wide, withZero.nodes);
  step("wide: tokens/s, setups alternating");
  const [tpsWideDirect, tpsWideTls, tpsWideQuic] = (await alternate([wideDirect, withZero, wideQuic])) as [number, number, number];
  for (const s of [wideDirect, withZero, wideQuic]) await s.stop();
  step("wide: a split whose workers lend compute only (the weights cross)");
  const withoutZero: MeshSetup = await meshSplit(places, LLAMA_ARGS, wide, false, "on");
  await withoutZero.stop();

  const mb = (b: number) => (b / 2 ** 20).toFixed(1);
  const ratio = (a: number, b: number) => `${((a / b) * 100).toFixed(0)}%`;
  return [
    ["one connection (MB/s)", mbDirect.toFixed(0), mbTunnel.toFixed(0), ratio(mbTunnel, mbDirect), ">= 300 MB/s (loopback)"],
    ["100-byte round trip p50 (us)", pct(rttDirect, 50).toFixed(0), pct(rttTunnel, 50).toFixed(0), "", ""],
    ["100-byte round trip p99 (us)", pct(rttDirect, 99).toFixed(0), pct(rttTunnel, 99).toFixed(0), "", ""],
    ["tiny split x3, tokens/s (mesh: direct TLS path)", tpsDirect.toFixed(1), tpsTls.toFixed(1), ratio(tpsTls, tpsDirect), ">= 90% of direct"],
    ["tiny split x3, tokens/s (mesh: QUIC streams only)", tpsDirect.toFixed(1), tpsQuic.toFixed(1), ratio(tpsQuic, tpsDirect), ""],
    ["wide split x3, tokens/s (mesh: direct TLS path)", tpsWideDirect.toFixed(1), tpsWideTls.toFixed(1), ratio(tpsWideTls, tpsWideDirect), ">= 90% of direct"],
    ["wide split x3, tokens/s (mesh: QUIC streams only)", tpsWideDirect.toFixed(1), tpsWideQuic.toFixed(1), ratio(tpsWideQuic, tpsWideDirect), ""],
    ["wide load, MiB to workers: without / with zero-transfer", mb(withoutZero.crossed), mb(withZero.crossed), `${((withZero.crossed / (withZero.saved + withZero.crossed)) * 100).toFixed(1)}% of share`, "<= 5% of share"],
    ["wide load, ms: without / with zero-transfer", String(withoutZero.loadMs), String(withZero.loadMs), "", ""],
    ["wide: workers' share (MiB)", "", mb(withZero.saved + withZero.crossed), "", ""],
  ];
}

async function run(places: Places): Promise<void> {
  open.add(places);
  try {
    const rows = await measure(places);
    console.log(`\n${places.label}:\n`);
    printTable(["measure", "direct / without", "mesh / with", "ratio", "goal"], rows);
  } finally {
    await places.close();
    open.delete(places);
  }
}

let failed = false;
try {
  await run(loopbackPlaces());
  if (values.lab) {
    const why = labUnavailable();
    if (why !== undefined) console.log(`\nlab: skipped, the lab cannot run here: ${why}`);
    else await run(await labPlaces(MBIT));
  }
  console.log(
    `\n${MIB} MiB per throughput run, ${PINGS} round trips, ${TOKENS} tokens per generation (median of ${ROUNDS}, setups alternating);` +
      ` --vram forces every split over exactly 3 nodes (host ${HOST_SHARE * 100}% of the model's need, each worker ${WORKER_SHARE * 100}%); llama.cpp 1 thread per process`,
  );
} catch (err) {
  failed = true;
  console.error(`bench tunnel: ${err instanceof Error ? err.message : String(err)}`);
} finally {
  await cleanup();
}
process.exit(failed ? 1 : 0);
