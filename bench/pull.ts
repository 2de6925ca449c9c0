#!/usr/bin/env bun
/**
 * Getting a model from a Hub (a fake one on loopback that speaks Hugging Face's protocol and redirects
 * each file to a second host, as the real one does): how fast `pullModel` fetches, verifies and
 * installs the wide test model next to a plain download of the same bytes to disk, how much a pull
 * cut at half fetches again when it resumes, and, for a mesh of N nodes all started with
 * `--model org/repo:Q8_0`, how many times the Hub served the file and how long until all N had it.
 *
 *   bun bench/pull.ts [--runs 3] [--nodes 3]
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { pullModel } from "../models/pull.ts";
import { provideDevLlama } from "../scripts/llama-dev.ts";
import { killAllChildren } from "../harness/children.ts";
import { startFakeHub } from "../harness/fake-hub.ts";
import { meshStatus, startMeshNode, type MeshTestNode } from "../harness/mesh.ts";
import { testModel } from "../harness/models.ts";
import { waitFor } from "../harness/wait.ts";
import { printTable } from "./report.ts";

const { values } = parseArgs({ options: { runs: { type: "string", default: "3" }, nodes: { type: "string", default: "3" } } });
const RUNS = Number(values.runs);
const NODES = Number(values.nodes);
process.env.MESH_LLAMA_DIR = (await provideDevLlama()).dir;

const REPO = "bench-org/wide-GGUF";
const FILE = "wide-q8_0.gguf";
const REF = `${REPO}:Q8_0`;
const small = ["--ctx-size", "512", "--llamacpp-args", "--threads 1", "--rpc-threads", "1"];
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const mibs = (bytes: number, ms: number) => (bytes / 2 ** 20 / (ms / 1000)).toFixed(0);

const wide = await testModel("wide", "q8_0");
const size = Bun.file(wide).size;
const hub = await startFakeHub({ repos: [{ repo: REPO, files: { [FILE]: { fromFile: wide } } }] });
const hubConfig = { endpoint: hub.endpoint, token: undefined };
const scratch = mkdtempSync(join(tmpdir(), "mesh-bench-pull-"));
const fresh = (label: string) => mkdtempSync(join(scratch, `${label}-`));
const nodes: MeshTestNode[] = [];

try {
  const plain: number[] = [];
  const pulled: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    // The same bytes by the same route (resolve, redirect, CDN) straight to a file: the floor.
    let t0 = performance.now();
    await Bun.write(join(fresh("plain"), FILE), await fetch(`${hub.endpoint}/${REPO}/resolve/main/${FILE}`));
    plain.push(performance.now() - t0);
    t0 = performance.now();
    await pullModel({ ref: REF, modelsDir: fresh("pull"), hub: hubConfig });
    pulled.push(performance.now() - t0);
  }

  // The connection cut at half: the pull's next try asks for the rest only.
  hub.cutNext(REPO, FILE, Math.floor(size / 2));
  const before = hub.requests.length;
  await pullModel({ ref: REF, modelsDir: fresh("resume"), hub: hubConfig });
  const range = hub.requests.slice(before).find((r) => r.server === "cdn" && r.range)?.range ?? "";
  const resumedFrom = Number(/bytes=(\d+)-/.exec(range)?.[1] ?? 0);

  // N nodes all asked for the model by its reference; nobody has it.
  const downloadsBefore = hub.downloads(REPO, FILE);
  const t0 = performance.now();
  const first = await startMeshNode([...small, "--model", REF], { env: { HF_ENDPOINT: hub.endpoint } });
  nodes.push(first);
  nodes.push(...(await Promise.all(Array.from({ length: NODES - 1 }, () => startMeshNode([...small, "--model", REF, "--join", first.token], { env: { HF_ENDPOINT: hub.endpoint } })))));
  await waitFor(
    async () => {
      const status = (await meshStatus(first)) as unknown as { models: { catalog: { name: string; nodesOnDisk: string[] }[] } };
      return (status.models.catalog.find((m) => m.name === REF)?.nodesOnDisk.length ?? 0) === NODES;
    },
    { what: `all ${NODES} nodes to have the model`, timeoutMs: 180_000, intervalMs: 50 },
  );
  const meshMs = performance.now() - t0;
  const meshDownloads = hub.downloads(REPO, FILE) - downloadsBefore;

  printTable(
    ["measure", "plain download", "pullModel", "goal"],
    [
      [`${(size / 2 ** 20).toFixed(1)} MiB from the Hub, ms (median of ${RUNS})`, median(plain).toFixed(0), median(pulled).toFixed(0), ""],
      ["MiB/s", mibs(size, median(plain)), mibs(size, median(pulled)), ""],
      ["a pull whose connection is cut at half: resumed from byte", "", `${resumedFrom} (${((100 * resumedFrom) / size).toFixed(0)}%)`, "> 0"],
      [`${NODES} nodes with --model ${REF}: Hub downloads`, "", String(meshDownloads), "1"],
      [`${NODES} nodes: first spawn -> all have it (ms)`, "", meshMs.toFixed(0), ""],
    ],
  );
  console.log(`\nloopback; the Hub redirects each file to a second host; pullModel lists the repo, checks space and access, stages, hashes (SHA-256) and installs`);
} finally {
  await Promise.all(nodes.map((n) => n.stop()));
  await killAllChildren();
  await hub.stop();
  rmSync(scratch, { recursive: true, force: true });
}
