#!/usr/bin/env bun
/**
 * What a request pays for being answered by another node: small non-streaming completions through
 * the host's own API vs through a node without the model (forwarded over the mesh), p50/p99.
 *
 *   bun bench/remote-routing.ts [--requests 300]
 */
import { parseArgs } from "node:util";
import { provideDevLlama } from "../scripts/llama-dev.ts";
import { pct, printTable } from "./report.ts";
import { loaded } from "../harness/api.ts";
import { killAllChildren } from "../harness/children.ts";
import { meshStatus, startMeshNode, waitForFullMesh } from "../harness/mesh.ts";
import { testModel } from "../harness/models.ts";
import { waitFor } from "../harness/wait.ts";

const { values } = parseArgs({ options: { requests: { type: "string", default: "300" } } });
const REQUESTS = Number(values.requests);
process.env.MESH_LLAMA_DIR = (await provideDevLlama()).dir;

const small = ["--ctx-size", "512", "--llamacpp-args", "--threads 1", "--rpc-threads", "1"];
const body = JSON.stringify({ model: "tiny-q8_0", prompt: "hello", max_tokens: 1, temperature: 0 });

async function timed(url: string): Promise<number> {
  const t = performance.now();
  const res = await fetch(`${url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body });
  await res.arrayBuffer();
  if (res.status !== 200) throw new Error(`${url}: ${res.status}`);
  return performance.now() - t;
}

try {
  const host = await startMeshNode([...small, "--model", await testModel("tiny", "q8_0")]);
  const entry = await startMeshNode([...small, "--join", host.token]);
  await waitForFullMesh([host, entry]);
  await waitFor(async () => (await loaded(host)).some((s) => s.state === "ready"), { what: "the host to serve the model", timeoutMs: 60_000 });
  await waitFor(async () => (await meshStatus(entry)).peers.some((p) => p.serving.includes("tiny-q8_0")), { what: "the entry to see the model" });
  for (let i = 0; i < 20; i++) await Promise.all([timed(host.url), timed(entry.url)]);
  const local: number[] = [];
  const remote: number[] = [];
  for (let i = 0; i < REQUESTS; i++) {
    local.push(await timed(host.url));
    remote.push(await timed(entry.url));
  }
  await Promise.all([host.stop(), entry.stop()]);
  const f = (x: number) => x.toFixed(2);
  printTable(
    ["request", "local (ms)", "via another node (ms)", "added (ms)"],
    [50, 99].map((p) => [`p${p}`, f(pct(local, p)), f(pct(remote, p)), f(pct(remote, p) - pct(local, p))]),
  );
  console.log(`\n${REQUESTS} paired 1-token completions: "local" is the host's own API, the other node forwards over the mesh`);
} finally {
  await killAllChildren();
}
process.exit(0);
