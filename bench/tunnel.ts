#!/usr/bin/env bun
/**
 * The RPC tunnel against plain TCP on loopback, in one run:
 * 1. one connection's throughput and a 100-byte round trip, through our pump over iroh QUIC
 *    (the same `socketToQuic`/`quicToSocket` the tunnels use) vs straight TCP;
 * 2. generation tokens/s of a model split over three rpc-servers, through the mesh (host + two
 *    workers, real nodes) vs llama-server connected straight to three local rpc-servers;
 * 3. load bytes and time of the `wide` model across the mesh, with and without zero-transfer.
 *
 *   bun bench/tunnel.ts [--mib 512] [--pings 2000] [--tokens 128]
 *
 * Goals: tunnel >= 300 MB/s; tokens/s through the mesh >= 90% of direct; zero-transfer load
 * bytes <= 5% of the workers' share. Loopback only; every process is stopped at the end.
 */
import { randomBytes } from "node:crypto";
import { statSync } from "node:fs";
import { basename } from "node:path";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { parseArgs } from "node:util";
import { Transport, type Stream } from "../mesh/transport.ts";
import { readGgufFacts } from "../models/gguf-info.ts";
import { needOf } from "../models/model-need.ts";
import { freePort } from "../pool/free-port.ts";
import { pct, printTable } from "./report.ts";
import { provideDevLlama } from "../scripts/llama-dev.ts";
import { quicToSocket, socketToQuic } from "../tunnel/pump.ts";
import { loaded } from "../tests/helpers/api.ts";
import { killAllChildren, spawnChild } from "../tests/helpers/children.ts";
import { startMeshNode, waitForFullMesh, type MeshTestNode } from "../tests/helpers/mesh.ts";
import { testModel } from "../tests/helpers/models.ts";
import { waitFor } from "../tests/helpers/wait.ts";

const { values } = parseArgs({ options: { mib: { type: "string", default: "512" }, pings: { type: "string", default: "2000" }, tokens: { type: "string", default: "128" } } });
const MIB = Number(values.mib);
const PINGS = Number(values.pings);
const TOKENS = Number(values.tokens);

const llama = await provideDevLlama();
process.env.MESH_LLAMA_DIR = llama.dir;

function listen(handler: (s: Socket) => void): Promise<{ server: Server; port: number }> {
  const server = createServer({ allowHalfOpen: true, noDelay: true }, handler);
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve({ server, port: (server.address() as { port: number }).port })));
}

function connect(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = createConnection({ host: "127.0.0.1", port, noDelay: true }, () => resolve(s));
    s.once("error", reject);
  });
}

/** A sink that counts bytes and answers "done" when the sender half-closes; an echo for pings. */
const sink = await listen((s) => {
  let n = 0;
  s.on("data", (d) => (n += d.length));
  s.on("end", () => s.end(`${n}`));
});
const echo = await listen((s) => s.on("data", (d) => s.write(d)));

/** A tunnel port in front of `targetPort`: TCP -> QUIC stream -> TCP, through two iroh endpoints. */
async function tunnelTo(targetPort: number): Promise<{ port: number; close: () => Promise<void> }> {
  const bind = { ipv4Addr: "127.0.0.1:0", ipv6Addr: "[::1]:0", relay: "disabled" as const };
  const far = await Transport.bind({
    ...bind,
    secretKey: randomBytes(32),
    onConnection: async (conn) => {
      for (;;) {
        let stream: Stream;
        try {
          stream = await conn.acceptStream();
        } catch {
          return;
        }
        const socket = await connect(targetPort);
        void Promise.all([quicToSocket(stream.recv, socket, { bytes: 0 }), socketToQuic(socket, stream.send, { bytes: 0 })]);
      }
    },
  });
  const near = await Transport.bind({ ...bind, secretKey: randomBytes(32), onConnection: () => undefined });
  const conn = await near.dial(await far.addr());
  const local = await listen(async (socket) => {
    const stream = await conn.openStream();
    void Promise.all([socketToQuic(socket, stream.send, { bytes: 0 }), quicToSocket(stream.recv, socket, { bytes: 0 })]);
  });
  return { port: local.port, close: async () => void (local.server.close(), await near.close(), await far.close()) };
}

async function throughput(port: number): Promise<number> {
  const s = await connect(port);
  const chunk = new Uint8Array(1 << 20);
  const t = performance.now();
  const answer = new Promise<string>((resolve) => {
    let text = "";
    s.on("data", (d) => (text += d));
    s.on("end", () => resolve(text));
  });
  for (let i = 0; i < MIB; i++) if (!s.write(chunk)) await new Promise((r) => s.once("drain", r));
  s.end();
  const received = Number(await answer);
  if (received !== MIB * 2 ** 20) throw new Error(`sink got ${received} bytes`);
  return (MIB * 2 ** 20) / 1e6 / ((performance.now() - t) / 1000);
}

async function roundTrips(port: number): Promise<number[]> {
  const s = await connect(port);
  const msg = new Uint8Array(100);
  const times: number[] = [];
  let pending: (() => void) | undefined;
  let got = 0;
  s.on("data", (d) => {
    got += d.length;
    if (got >= 100) {
      got -= 100;
      pending?.();
    }
  });
  for (let i = 0; i < PINGS; i++) {
    const t = performance.now();
    await new Promise<void>((resolve) => {
      pending = resolve;
      s.write(msg);
    });
    times.push((performance.now() - t) * 1000);
  }
  s.destroy();
  return times;
}


/** Tokens/s of one generation, as llama-server measured it. */
async function generate(url: string, model: string): Promise<number> {
  const res = await fetch(`${url}/v1/completions`, {
    method: "POST",
    body: JSON.stringify({ model, prompt: "hello", max_tokens: TOKENS, ignore_eos: true, temperature: 0 }),
  });
  const body = (await res.json()) as { timings: { predicted_per_second: number } };
  return body.timings.predicted_per_second;
}

interface Setup {
  url: string;
  model: string;
  stop: () => Promise<void>;
}

/** llama-server straight on three local rpc-servers: the same layout as a host and two workers. */
async function directSplit(model: string): Promise<Setup> {
  const ports = [freePort(), freePort(), freePort()];
  const rpcs = ports.map((p) => spawnChild("rpc-server", [llama.rpcServer, "-H", "127.0.0.1", "-p", String(p), "-t", "1"]));
  await Promise.all(ports.map((p) => waitFor(() => connect(p).then((s) => (s.destroy(), true)), { what: "rpc-server" })));
  const port = freePort();
  const server = spawnChild("llama-server", [llama.llamaServer, "-m", model, "--host", "127.0.0.1", "--port", String(port), "--rpc", ports.map((p) => `127.0.0.1:${p}`).join(","), "-ngl", "999", "-t", "1", "-c", "512"], {
    env: { GGML_NO_BACKTRACE: "1" },
  });
  const url = `http://127.0.0.1:${port}`;
  await waitFor(async () => (await fetch(`${url}/health`)).status === 200, { what: "direct llama-server", timeoutMs: 60_000 });
  return { url, model: "x", stop: async () => void (await Promise.all([server, ...rpcs].map((c) => c.stop()))) };
}

interface MeshSetup extends Setup {
  loadMs: number;
  crossed: number;
  saved: number;
}

/** Two workers and a host with `--model`, once the host's model runs across all three. */
async function meshSplit(model: string, workerHasModel: boolean, direct: "on" | "off" = "on"): Promise<MeshSetup> {
  const small = ["--ctx-size", "512", "--llamacpp-args", "--threads 1", "--rpc-threads", "1", "--rpc-direct", direct];
  // Under the host's name for it: a file named otherwise is another model to the mesh.
  const models: Record<string, string> = workerHasModel ? { [basename(model)]: model } : {};
  // By --vram the model fits on no node alone (a model that fits runs solo), and the host has the most.
  const need = needOf(statSync(model).size, await readGgufFacts(model), 512);
  const vram = (share: number) => ["--vram", String(Math.ceil(need * share))];
  // Workers without the file lend compute only: otherwise they copy it first and zero-transfer applies.
  const workerArgs = [...small, ...vram(0.45), ...(workerHasModel ? [] : ["--fetch", "off"])];
  const w1 = await startMeshNode(workerArgs, { models });
  const w2 = await startMeshNode([...workerArgs, "--join", w1.token], { models });
  const host = await startMeshNode([...small, ...vram(0.6), "--join", w1.token, "--model", model]);
  const all: MeshTestNode[] = [w1, w2, host];
  await waitForFullMesh(all);
  const name = model.split("/").pop()!.replace(/\.gguf$/, "");
  await waitFor(async () => (await loaded(host)).some((s) => s.model_name === name && (s as { rpc_workers?: string[] }).rpc_workers?.length === 3 && s.state === "ready"), {
    what: "the split",
    timeoutMs: 120_000,
  }).catch((err: unknown) => {
    for (const [who, n] of [["host", host], ["w1", w1], ["w2", w2]] as const) console.error(`${who}'s log:\n${n.child.output().slice(-2500)}`);
    throw err;
  });
  const readies = [...host.child.output().matchAll(/model ready model=\S+ ms=(\d+)/g)];
  // Load bytes: what crossed to the workers by the time the split is ready, before any generation.
  let crossed = 0;
  let saved = 0;
  for (const w of [w1, w2]) {
    const st = (await (await fetch(`${w.url}/api/status`)).json()) as { tunnels: Record<string, { fromPeerHost: { bytes: number } }>; zeroTransfer: { bytesSaved: number } };
    crossed += st.tunnels[host.nodeId]!.fromPeerHost.bytes;
    saved += st.zeroTransfer.bytesSaved;
  }
  return { url: host.url, model: name, loadMs: Number(readies.at(-1)![1]), crossed, saved, stop: async () => void (await Promise.all(all.map((n) => n.stop()))) };
}

/** Median tokens/s of each setup, measured in alternation so drift on a shared machine hits all alike. */
async function alternate(setups: Setup[], rounds = 5): Promise<number[]> {
  for (const s of setups) await generate(s.url, s.model);
  const samples = setups.map(() => [] as number[]);
  for (let r = 0; r < rounds; r++) for (const [i, s] of setups.entries()) samples[i]!.push(await generate(s.url, s.model));
  return samples.map((xs) => pct(xs, 50));
}

try {
  const tunnel = await tunnelTo(sink.port);
  const echoTunnel = await tunnelTo(echo.port);
  const mbDirect = await throughput(sink.port);
  const mbTunnel = await throughput(tunnel.port);
  const rttDirect = await roundTrips(echo.port);
  const rttTunnel = await roundTrips(echoTunnel.port);
  await tunnel.close();
  await echoTunnel.close();

  const tiny = await testModel("tiny", "q8_0");
  const wide = await testModel("wide", "q8_0");
  const tinySetups = [await directSplit(tiny), await meshSplit(tiny, false), await meshSplit(tiny, false, "off")];
  const [tpsDirect, tpsTls, tpsQuic] = (await alternate(tinySetups)) as [number, number, number];
  for (const s of tinySetups) await s.stop();
  const withZero = await meshSplit(wide, true);
  const wideSetups = [await directSplit(wide), withZero, await meshSplit(wide, true, "off")];
  const [wideDirect, wideTls, wideQuic] = (await alternate(wideSetups)) as [number, number, number];
  for (const s of wideSetups) await s.stop();
  const withoutZero = await meshSplit(wide, false);
  await withoutZero.stop();

  const mb = (b: number) => (b / 2 ** 20).toFixed(1);
  const rows: string[][] = [
    ["one connection (MB/s)", mbDirect.toFixed(0), mbTunnel.toFixed(0), `${((mbTunnel / mbDirect) * 100).toFixed(0)}%`, ">= 300 MB/s"],
    ["100-byte round trip p50 (us)", pct(rttDirect, 50).toFixed(0), pct(rttTunnel, 50).toFixed(0), "", ""],
    ["100-byte round trip p99 (us)", pct(rttDirect, 99).toFixed(0), pct(rttTunnel, 99).toFixed(0), "", ""],
    ["tiny split x3, tokens/s (mesh: direct TLS path)", tpsDirect.toFixed(1), tpsTls.toFixed(1), `${((tpsTls / tpsDirect) * 100).toFixed(0)}%`, ">= 90% of direct"],
    ["tiny split x3, tokens/s (mesh: QUIC streams only)", tpsDirect.toFixed(1), tpsQuic.toFixed(1), `${((tpsQuic / tpsDirect) * 100).toFixed(0)}%`, ""],
    ["wide split x3, tokens/s (mesh: direct TLS path)", wideDirect.toFixed(1), wideTls.toFixed(1), `${((wideTls / wideDirect) * 100).toFixed(0)}%`, ">= 90% of direct"],
    ["wide split x3, tokens/s (mesh: QUIC streams only)", wideDirect.toFixed(1), wideQuic.toFixed(1), `${((wideQuic / wideDirect) * 100).toFixed(0)}%`, ""],
    ["wide load, MiB to workers: without / with zero-transfer", mb(withoutZero.crossed), mb(withZero.crossed), `${((withZero.crossed / (withZero.saved + withZero.crossed)) * 100).toFixed(1)}% of share`, "<= 5% of share"],
    ["wide load, ms: without / with zero-transfer", String(withoutZero.loadMs), String(withZero.loadMs), "", ""],
  ];
  const header = ["measure", "direct / without", "mesh / with", "ratio", "goal"];
  printTable(header, rows);
  console.log(`\n${MIB} MiB per throughput run, ${PINGS} round trips, ${TOKENS} tokens per generation (median of 5, setups alternating); workers' share of wide = ${mb(withZero.saved + withZero.crossed)} MiB`);
} finally {
  sink.server.close();
  echo.server.close();
  await killAllChildren();
}
process.exit(0);
