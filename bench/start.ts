#!/usr/bin/env bun
/**
 * How long `mesh` with no flags takes from spawn to `running` (its `/api/status` says the mesh
 * endpoint is up), on each iroh line: a fresh state dir every run, as a new user's first start.
 * Nothing is passed on the command line but the line's `--transport` for the 0.35 row; the
 * environment keeps the run on this machine (a HOME of its own, QUIC on loopback, relays off, the dev
 * llama.cpp and the API on a free port), as every bench and test must.
 *
 *   bun bench/start.ts [--runs 3] [--binary dist/mesh]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import type { TransportLine } from "../mesh/transport.ts";
import { provideDevLlama } from "../scripts/llama-dev.ts";
import { killAllChildren, spawnChild } from "../harness/children.ts";
import { meshCommand } from "../harness/node.ts";
import { waitFor } from "../harness/wait.ts";
import { pct, printTable } from "./report.ts";

const { values } = parseArgs({ options: { runs: { type: "string", default: "3" }, binary: { type: "string" } } });
const RUNS = Number(values.runs);
const llamaDir = (await provideDevLlama()).dir;
const command = values.binary ? [values.binary] : meshCommand();

interface Run {
  /** spawn -> the API answers; spawn -> its status says `running`. */
  listening: number;
  running: number;
}

async function timedStart(line: TransportLine | undefined): Promise<Run> {
  const home = mkdtempSync(join(tmpdir(), "mesh-bench-start-"));
  const env = { HOME: home, MESH_LLAMA_DIR: llamaDir, MESH_PORT: "0", MESH_RELAY: "disabled", MESH_QUIC_BIND: "127.0.0.1:0", MESH_SCAN_MODEL_STORES: "off" };
  const t0 = performance.now();
  const child = spawnChild("mesh", [...command, ...(line ? ["--transport", line] : [])], { env });
  try {
    const url = (await child.waitForOutput(/listening on (http:\/\/[^\s]+:\d+)/, 60_000))[1]!;
    const listening = performance.now() - t0;
    await waitFor(async () => ((await (await fetch(`${url}/api/status`)).json()) as { state: string }).state === "running", { what: "running", timeoutMs: 60_000, intervalMs: 5 });
    return { listening, running: performance.now() - t0 };
  } finally {
    await child.stop();
    rmSync(home, { recursive: true, force: true });
  }
}

try {
  const rows: string[][] = [];
  for (const [label, line] of [["no flags (iroh1)", undefined], ["--transport iroh035", "iroh035"]] as const) {
    const runs: Run[] = [];
    for (let i = 0; i < RUNS; i++) runs.push(await timedStart(line));
    const ms = (xs: number[]) => `${Math.round(pct(xs, 50))} ms`;
    rows.push([label, String(RUNS), ms(runs.map((r) => r.listening)), ms(runs.map((r) => r.running)), runs.map((r) => Math.round(r.running)).join(", ")]);
  }
  printTable(["start", "runs", "spawn → API, median", "spawn → running, median", "each run (ms)"], rows);
} finally {
  await killAllChildren();
}
