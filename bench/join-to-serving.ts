#!/usr/bin/env bun
/**
 * How long a node takes from `mesh --join <token> --model M` to answering for M itself: with the
 * file already on its disk, and with the file copied from a peer over the mesh first. The seeder
 * has both models and hosts the tiny one, so the joiner's model is one nobody serves yet.
 *
 *   bun bench/join-to-serving.ts [--runs 3]
 */
import { parseArgs } from "node:util";
import { ANSWERED_BY_HEADER } from "../mesh/routing.ts";
import { provideDevLlama } from "../scripts/llama-dev.ts";
import { killAllChildren } from "../tests/helpers/children.ts";
import { meshReady, startMeshNode, type MeshTestNode } from "../tests/helpers/mesh.ts";
import { testModel } from "../tests/helpers/models.ts";
import { startNode } from "../tests/helpers/node.ts";
import { waitFor } from "../tests/helpers/wait.ts";
import { pct, printTable } from "./report.ts";

const { values } = parseArgs({ options: { runs: { type: "string", default: "3" } } });
const RUNS = Number(values.runs);
process.env.MESH_LLAMA_DIR = (await provideDevLlama()).dir;

const small = ["--ctx-size", "512", "--llamacpp-args", "--threads 1", "--rpc-threads", "1"];
const WIDE = "wide-q8_0";

async function answeredByItself(n: MeshTestNode): Promise<boolean> {
  const res = await fetch(`${n.url}/v1/completions`, { method: "POST", body: JSON.stringify({ model: WIDE, prompt: "hi", max_tokens: 1 }) });
  await res.arrayBuffer();
  return res.status === 200 && res.headers.get(ANSWERED_BY_HEADER) === n.nodeId;
}

/** ms from spawning the joiner to its mesh endpoint being up, and to it answering for the model itself. */
async function joinOnce(seeder: MeshTestNode, hasFile: boolean, wide: string): Promise<{ endpoint: number; serving: number }> {
  const t0 = performance.now();
  const joiner = await meshReady(await startNode([...small, "--join", seeder.token, "--model", WIDE], hasFile ? { models: { [`${WIDE}.gguf`]: wide } } : {}));
  const endpoint = performance.now() - t0;
  await waitFor(() => answeredByItself(joiner), { what: "the joiner to serve the model", timeoutMs: 120_000, intervalMs: 20 });
  const serving = performance.now() - t0;
  await joiner.stop();
  return { endpoint, serving };
}

try {
  const wide = await testModel("wide", "q8_0");
  const tiny = await testModel("tiny", "q8_0");
  const rows: string[][] = [];
  for (const hasFile of [true, false]) {
    const endpoint: number[] = [];
    const serving: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      // A fresh seeder per run, so the joiner is always a stranger to it.
      const seeder = await startMeshNode([...small, "--model", "tiny-q8_0"], { models: { [`${WIDE}.gguf`]: wide, "tiny-q8_0.gguf": tiny } });
      const r = await joinOnce(seeder, hasFile, wide);
      await seeder.stop();
      endpoint.push(r.endpoint);
      serving.push(r.serving);
    }
    const f = (xs: number[]) => `${Math.round(pct(xs, 50))}`;
    rows.push([hasFile ? "on its disk" : "copied from a peer (91.5 MiB)", f(endpoint), f(serving), f(serving.map((s, i) => s - endpoint[i]!))]);
  }
  printTable(["the joiner's model", "spawn -> mesh endpoint up (ms)", "spawn -> answering itself (ms)", "endpoint up -> answering (ms)"], rows);
  console.log(`\nmedian of ${RUNS} runs each; loopback, relays off; the wide test model (3 layers, Q8_0)`);
} finally {
  await killAllChildren();
}
process.exit(0);
