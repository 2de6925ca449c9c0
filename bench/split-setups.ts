/**
 * The two setups bench/tunnel.ts compares, on loopback or in the lab (bench/places.ts): a model
 * split over three mesh nodes (a host with `--model` and two workers), and llama-server connected
 * straight to three plain rpc-servers placed beside those nodes, so both cross the same links.
 * `--vram` is sized from the model's need (as tests/e2e/split.test.ts does) so that no two nodes
 * can hold it and all three can: the split is forced over exactly three, whatever order the nodes
 * meet in. Every wait has a deadline.
 */
import { statSync } from "node:fs";
import { basename } from "node:path";
import { createConnection } from "node:net";
import { readGgufFacts } from "../models/gguf-info.ts";
import { needOf } from "../models/model-need.ts";
import { freePort } from "../pool/free-port.ts";
import { loaded } from "../harness/api.ts";
import { waitFor } from "../harness/wait.ts";
import { waitForFullMesh } from "../harness/mesh.ts";
import type { Places, PlacedNode } from "./places.ts";

export const CTX = 512;
const SPLIT_DEADLINE_MS = 180_000;
const GENERATE_DEADLINE_MS = 120_000;

/** Shares of the model's need: the host has the most (so it is elected), any two together fall short. */
export const HOST_SHARE = 0.4;
export const WORKER_SHARE = 0.35;

export interface Setup {
  url: string;
  model: string;
  stop: () => Promise<void>;
}

export interface MeshSetup extends Setup {
  nodes: PlacedNode[];
  loadMs: number;
  /** Bytes that crossed from the host to the workers by the time the split was ready. */
  crossed: number;
  /** Bytes the workers placed from their own copy of the file instead (zero-transfer). */
  saved: number;
}

/** `--vram` that gives a node `share` of what `model` needs at the bench's context. */
export async function vramFor(model: string, share: number): Promise<string[]> {
  const need = needOf(statSync(model).size, await readGgufFacts(model), CTX);
  return ["--vram", String(Math.ceil(need * share))];
}

export const modelName = (path: string) => basename(path).replace(/\.gguf$/, "");

/** Tokens/s of one generation of `tokens` tokens, as llama-server measured it. */
export async function generate(s: Setup, tokens: number): Promise<number> {
  const res = await fetch(`${s.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: s.model, prompt: "hello", max_tokens: tokens, ignore_eos: true, temperature: 0 }),
    signal: AbortSignal.timeout(GENERATE_DEADLINE_MS),
  });
  if (res.status !== 200) throw new Error(`${s.url} answered ${res.status}: ${(await res.text()).slice(0, 500)}`);
  const body = (await res.json()) as { timings: { predicted_per_second: number } };
  return body.timings.predicted_per_second;
}

/** Two workers and a host with `--model`, once the host's model runs across all three. */
export async function meshSplit(places: Places, llamaArgs: string[], model: string, workerHasModel: boolean, direct: "on" | "off"): Promise<MeshSetup> {
  const small = [...llamaArgs, "--rpc-direct", direct];
  // Under the host's name for it: a file named otherwise is another model to the mesh.
  const models: Record<string, string> = workerHasModel ? { [basename(model)]: model } : {};
  // Workers without the file lend compute only: otherwise they copy it first and zero-transfer applies.
  const workerArgs = [...small, ...(await vramFor(model, WORKER_SHARE)), ...(workerHasModel ? [] : ["--fetch", "off"])];
  const w1 = await places.start(workerArgs, { models });
  const w2 = await places.start([...workerArgs, "--join", w1.token], { models });
  const host = await places.start([...small, ...(await vramFor(model, HOST_SHARE)), "--join", w1.token, "--model", model]);
  const nodes = [w1, w2, host];
  const name = modelName(model);
  try {
    await waitForFullMesh(nodes, 60_000);
    await waitFor(async () => (await loaded(host)).some((s) => s.model_name === name && (s as { rpc_workers?: string[] }).rpc_workers?.length === 3 && s.state === "ready"), {
      what: `${name} to run on the host across 3 rpc-servers`,
      timeoutMs: SPLIT_DEADLINE_MS,
    });
  } catch (err) {
    for (const [who, n] of [["host", host], ["w1", w1], ["w2", w2]] as const) console.error(`${who}'s log:\n${n.child.output().slice(-2500)}`);
    throw err;
  }
  const readies = [...host.child.output().matchAll(/model ready model=\S+ ms=(\d+)/g)];
  let crossed = 0;
  let saved = 0;
  for (const w of [w1, w2]) {
    const st = (await (await fetch(`${w.url}/api/status`, { signal: AbortSignal.timeout(10_000) })).json()) as {
      tunnels: Record<string, { fromPeerHost: { bytes: number } }>;
      zeroTransfer: { bytesSaved: number };
    };
    crossed += st.tunnels[host.nodeId]?.fromPeerHost.bytes ?? 0;
    saved += st.zeroTransfer.bytesSaved;
  }
  return { url: host.url, model: name, nodes, loadMs: Number(readies.at(-1)?.[1] ?? NaN), crossed, saved, stop: async () => void (await Promise.all(nodes.map((n) => n.stop()))) };
}

async function reachable(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createConnection({ host, port }, () => (s.destroy(), resolve(true)));
    s.once("error", () => resolve(false));
  });
}

/**
 * llama-server straight on three plain rpc-servers: the layout of a host and two workers, each
 * rpc-server beside one of `beside` (the host last) and llama-server beside the host.
 */
export async function directSplit(places: Places, llama: { rpcServer: string; llamaServer: string }, model: string, beside: readonly PlacedNode[]): Promise<Setup> {
  const host = beside.at(-1)!;
  const rpcs = beside.map((n) => ({ n, port: freePort() }));
  const children = rpcs.map(({ n, port }) => places.beside(n, "rpc-server", [llama.rpcServer, "-H", n.address, "-p", String(port), "-t", "1"]));
  const stop = async () => void (await Promise.all(children.map((c) => c.stop())));
  try {
    for (const { n, port } of rpcs) await waitFor(() => reachable(n.address, port), { what: `a plain rpc-server on ${n.address}:${port}`, timeoutMs: 30_000 });
    const port = freePort();
    const rpc = rpcs.map(({ n, port: p }) => `${n.address}:${p}`).join(",");
    const argv = [llama.llamaServer, "-m", model, "--host", host.address, "--port", String(port), "--rpc", rpc, "-ngl", "999", "-t", "1", "-c", String(CTX)];
    const server = places.beside(host, "llama-server", argv, { GGML_NO_BACKTRACE: "1" });
    children.push(server);
    const url = `http://${host.address}:${port}`;
    await waitFor(
      async () => {
        if (server.proc.exitCode !== null) throw new Error(`llama-server exited ${server.proc.exitCode}: ${server.output().slice(-1500)}`);
        return (await fetch(`${url}/health`, { signal: AbortSignal.timeout(5_000) })).status === 200;
      },
      { what: "llama-server straight on the rpc-servers", timeoutMs: 120_000 },
    );
    return { url, model: "x", stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
