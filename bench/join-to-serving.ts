#!/usr/bin/env bun
/**
 * How long a node takes from `mesh --join <token> --model M` to serving M as the rest of the mesh
 * sees it (no request made to hurry it): with the file already on its disk, and with the file
 * copied from a peer over the mesh first. A request through the seeder then must be answered by it. The seeder
 * has both models and hosts the tiny one, so the joiner's model is one nobody serves yet.
 *
 *   bun bench/join-to-serving.ts [--runs 3]
 */
import { parseArgs } from "node:util";
import { ANSWERED_BY_HEADER } from "../mesh/routing.ts";
import { provideDevLlama } from "../scripts/llama-dev.ts";
import { killAllChildren } from "../tests/helpers/children.ts";
import { meshReady, startMeshNode, TOKEN_MADE, type MeshTestNode } from "../tests/helpers/mesh.ts";
import { testModel } from "../tests/helpers/models.ts";
import { startNode } from "../tests/helpers/node.ts";
import { waitFor } from "../tests/helpers/wait.ts";
import { pct, printTable } from "./report.ts";

const { values } = parseArgs({ options: { runs: { type: "string", default: "3" } } });
const RUNS = Number(values.runs);
process.env.MESH_LLAMA_DIR = (await provideDevLlama()).dir;

const small = ["--ctx-size", "512", "--llamacpp-args", "--threads 1", "--rpc-threads", "1"];
const WIDE = "wide-q8_0";

/** The seeder's catalog says the joiner serves the model (no request made: only the mesh's own work counts). */
async function seenServing(seeder: MeshTestNode, joiner: MeshTestNode): Promise<boolean> {
  const list = (await (await fetch(`${seeder.url}/v1/models`)).json()) as { data: { id: string; status: string; host?: string }[] };
  return list.data.some((m) => m.id === WIDE && m.status === "loaded" && m.host === joiner.nodeId);
}

async function answeredBy(via: MeshTestNode): Promise<string | null> {
  const res = await fetch(`${via.url}/v1/completions`, { method: "POST", body: JSON.stringify({ model: WIDE, prompt: "hi", max_tokens: 1 }) });
  await res.arrayBuffer();
  return res.status === 200 ? res.headers.get(ANSWERED_BY_HEADER) : null;
}

/** ms from spawning the joiner to its join token, to its mesh endpoint being up, and to it answering for the model itself. */
async function joinOnce(seeder: MeshTestNode, hasFile: boolean, wide: string): Promise<{ token: number; endpoint: number; serving: number }> {
  const t0 = performance.now();
  const started = await startNode([...small, "--join", seeder.token, "--model", WIDE], hasFile ? { models: { [`${WIDE}.gguf`]: wide } } : {});
  const since = () => performance.now() - t0;
  const [token, joiner] = await Promise.all([started.child.waitForOutput(TOKEN_MADE, 60_000).then(since), meshReady(started)]);
  const endpoint = since();
  await waitFor(() => seenServing(seeder, joiner), { what: "the seeder to see the joiner serve the model", timeoutMs: 120_000, intervalMs: 20 });
  const serving = performance.now() - t0;
  if ((await answeredBy(seeder)) !== joiner.nodeId) throw new Error("the seeder's request was not answered by the joiner");
  await joiner.stop();
  return { token, endpoint, serving };
}

try {
  const wide = await testModel("wide", "q8_0");
  const tiny = await testModel("tiny", "q8_0");
  const rows: string[][] = [];
  for (const hasFile of [true, false]) {
    const token: number[] = [];
    const endpoint: number[] = [];
    const serving: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      // A fresh seeder per run, so the joiner is always a stranger to it.
      const seeder = await startMeshNode([...small, "--model", "tiny-q8_0"], { models: { [`${WIDE}.gguf`]: wide, "tiny-q8_0.gguf": tiny } });
      const r = await joinOnce(seeder, hasFile, wide);
      await seeder.stop();
      token.push(r.token);
      endpoint.push(r.endpoint);
      serving.push(r.serving);
    }
    const f = (xs: number[]) => `${Math.round(pct(xs, 50))}`;
    rows.push([hasFile ? "on its disk" : "copied from a peer (91.5 MiB)", f(token), f(endpoint), f(serving), f(serving.map((s, i) => s - endpoint[i]!))]);
  }
  printTable(["the joiner's model", "spawn -> join token (ms)", "spawn -> mesh endpoint up (ms)", "spawn -> serving, as the seeder sees it (ms)", "endpoint up -> serving (ms)"], rows);
  console.log(`\nmedian of ${RUNS} runs each; loopback, relays off; the wide test model (3 layers, Q8_0)`);
} finally {
  await killAllChildren();
}
process.exit(0);
