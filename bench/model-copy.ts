#!/usr/bin/env bun
/**
 * A model copy between two real nodes, over the direct TLS path and over the mesh's QUIC
 * connection of each iroh line (`--rpc-direct off` on the node with the file): throughput of the whole copy (manifest,
 * bytes, the receiver's hash check and install: the joiner's "model copied from a peer"), on loopback and with
 * `--lab` in the lab with each link capped at `--mbit`. The node with the file is started once per
 * path and a first copy warms its hash of the file, so the runs time the copy alone.
 *
 *   bun bench/model-copy.ts [--model wide-f32] [--runs 3] [--lab] [--mbit 1000]
 *
 * Goal (issue 18): over the direct path, 90% or more of a 1 Gbit/s lab link.
 */
import { statSync } from "node:fs";
import { parseArgs } from "node:util";
import { DEFAULT_LINE, type TransportLine } from "../mesh/transport.ts";
import { provideDevLlama } from "../scripts/llama-dev.ts";
import { PRESET_NAMES, WEIGHT_TYPES, type PresetName, type WeightType } from "../scripts/test-model/presets.ts";
import { killAllChildren } from "../harness/children.ts";
import { startFakeHub } from "../harness/fake-hub.ts";
import { testModel } from "../harness/models.ts";
import { labUnavailable } from "../harness/lab/lab.ts";
import { labPlaces, loopbackPlaces, type Places } from "./places.ts";
import { pct, printTable } from "./report.ts";
import { step, watchdog } from "./watchdog.ts";

const { values } = parseArgs({
  options: {
    model: { type: "string", default: "wide-f32" },
    runs: { type: "string", default: "3" },
    lab: { type: "boolean", default: false },
    mbit: { type: "string", default: "1000" },
    "limit-minutes": { type: "string", default: "20" },
  },
});
const RUNS = Number(values.runs);
const MBIT = Number(values.mbit);
const [preset, type] = values.model.split("-") as [PresetName, WeightType];
if (!PRESET_NAMES.includes(preset) || !WEIGHT_TYPES.includes(type)) throw new Error(`--model: one of ${PRESET_NAMES.flatMap((p) => WEIGHT_TYPES.map((t) => `${p}-${t}`)).join(", ")}`);
const MODEL = `${preset}-${type}`;
process.env.MESH_LLAMA_DIR = (await provideDevLlama()).dir;
const SMALL = ["--ctx-size", "512", "--llamacpp-args", "--threads 1", "--rpc-threads", "1", "--replicas", "off"];

const open = new Set<Places>();
const cleanup = async () => {
  await Promise.all([...open].map((p) => p.close().catch((err: unknown) => console.error(`cleanup: ${String(err)}`))));
  await killAllChildren();
};
watchdog(Number(values["limit-minutes"]) * 60_000, cleanup);

/** ms of each copy (the joiner's own figure), the first one a warm-up left out. The joiner follows the seeder's line. */
async function copies(places: Places, file: string, direct: boolean, line: TransportLine): Promise<number[]> {
  const seeder = await places.start([...SMALL, "--model", MODEL, "--rpc-direct", direct ? "on" : "off", "--transport", line], { models: { [`${MODEL}.gguf`]: file } });
  const times: number[] = [];
  for (let i = 0; i <= RUNS; i++) {
    const joiner = await places.start([...SMALL, "--join", seeder.token, "--model", MODEL]);
    const fetched = await joiner.child.waitForOutput(new RegExp(`model copied from a peer model=${MODEL} peer=\\S+ size=\\d+ ms=(\\d+)`), 300_000);
    const path = joiner.child.output().match(/model copies from this peer go over the (direct path|mesh connection)/)?.[1];
    if (path !== (direct ? "direct path" : "mesh connection")) throw new Error(`the copy went over the ${path ?? "(unsaid)"}, not the ${direct ? "direct path" : "mesh connection"}`);
    if (i > 0) times.push(Number(fetched[1]));
    await joiner.stop();
  }
  await seeder.stop();
  return times;
}

/**
 * ms of each whole fetch (the joiner's "model fetched") of a model that is also on a Hub at the
 * bench's address (the lab's gateway: across the joiner's capped link), copied over the iroh1
 * mesh connection: the joiner measures the copy, tries the Hub and finishes from the faster; each
 * run checks the Hub finished it. Both nodes name the model by its Hub reference; the seeder pulls it first.
 */
async function hubCopies(places: Places, file: string): Promise<number[]> {
  const repo = "bench-org/wide-GGUF";
  const ref = `${repo}:${type.toUpperCase()}`;
  const hub = await startFakeHub({ repos: [{ repo, files: { [`${MODEL}.gguf`]: { fromFile: file } } }], hostname: places.benchAddress });
  try {
    const env = { HF_ENDPOINT: hub.endpoint };
    const seeder = await places.start([...SMALL, "--model", ref, "--rpc-direct", "off", "--transport", "iroh1"], { env });
    await seeder.child.waitForOutput(/model fetched/, 300_000);
    const times: number[] = [];
    const escaped = ref.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
    for (let i = 0; i <= RUNS; i++) {
      const joiner = await places.start([...SMALL, "--join", seeder.token, "--model", ref], { env });
      const fetched = await joiner.child.waitForOutput(new RegExp(`model fetched model=${escaped} ms=(\\d+)`), 300_000);
      if (!joiner.child.output().includes(`copying ${ref} from the hub`)) throw new Error(`the joiner did not finish ${ref} from the hub:\n${joiner.child.output().slice(-2000)}`);
      if (i > 0) times.push(Number(fetched[1]));
      await joiner.stop();
    }
    await seeder.stop();
    return times;
  } finally {
    await hub.stop();
  }
}

async function measure(places: Places, linkMBps: number | undefined): Promise<string[][]> {
  const file = await testModel(preset, type);
  const mb = statSync(file).size / 1e6;
  const rows: string[][] = [];
  // The direct path is the same on either line; the mesh connection is the line's own QUIC.
  const paths: [string, boolean, TransportLine][] = [
    ["direct TLS path", true, DEFAULT_LINE],
    ["mesh QUIC connection, iroh1 (--rpc-direct off)", false, "iroh1"],
    ["mesh QUIC connection, iroh035 (--rpc-direct off)", false, "iroh035"],
  ];
  for (const [label, direct, line] of paths) {
    step(`${MODEL}: ${label} (${places.label})`);
    const ms = pct(await copies(places, file, direct, line), 50);
    const mbps = mb / (ms / 1000);
    rows.push([label, mb.toFixed(1), ms.toFixed(0), mbps.toFixed(1), linkMBps ? `${((mbps / linkMBps) * 100).toFixed(0)}%` : "-"]);
  }
  step(`${MODEL}: iroh1 mesh connection, the model also on a Hub (${places.label})`);
  const ms = pct(await hubCopies(places, file), 50);
  const mbps = mb / (ms / 1000);
  rows.push(["mesh QUIC connection, iroh1, the model also on a Hub: measured, finished from the Hub", mb.toFixed(1), ms.toFixed(0), mbps.toFixed(1), linkMBps ? `${((mbps / linkMBps) * 100).toFixed(0)}%` : "-"]);
  return rows;
}

async function run(places: Places, linkMBps: number | undefined): Promise<void> {
  open.add(places);
  try {
    const rows = await measure(places, linkMBps);
    console.log(`\n${places.label}:\n`);
    printTable(["path", "MB", "copy p50 (ms)", "MB/s", "of the link"], rows);
  } finally {
    await places.close();
    open.delete(places);
  }
}

let failed = false;
try {
  await run(loopbackPlaces(), undefined);
  if (values.lab) {
    const why = labUnavailable();
    if (why !== undefined) console.log(`\nlab: skipped, the lab cannot run here: ${why}`);
    else await run(await labPlaces(MBIT), MBIT > 0 ? MBIT / 8 : undefined);
  }
  console.log(`\n${MODEL}, median of ${RUNS} copies per path after a warm-up copy; each copy by a fresh joiner from the same node; MB = 10^6 bytes`);
} catch (err) {
  failed = true;
  console.error(`bench model-copy: ${err instanceof Error ? err.message : String(err)}`);
} finally {
  await cleanup();
}
process.exit(failed ? 1 : 0);
