#!/usr/bin/env bun
/**
 * The two iroh lines side by side, in one run on loopback (relays off): endpoint start (to
 * `ready`), a 100-byte round trip on one stream, one stream's throughput, then real nodes on each
 * line (`--transport`): the latency a forwarded request adds, the tokens/s of a split over QUIC
 * only (`--rpc-direct off`: the fallback path), and a node's RSS in a formed mesh.
 *
 *   bun bench/transports.ts [--starts 5] [--pings 300] [--mib 32] [--requests 100] [--tokens 32]
 */
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { Transport, TRANSPORT_LINES, type TransportLine } from "../mesh/transport.ts";
import type { PeerConnection } from "../streams/stream.ts";
import { provideDevLlama } from "../scripts/llama-dev.ts";
import { killAllChildren } from "../harness/children.ts";
import { testModel } from "../harness/models.ts";
import { waitFor } from "../harness/wait.ts";
import { loopbackPlaces } from "./places.ts";
import { pct, printTable } from "./report.ts";
import { generate, meshSplit } from "./split-setups.ts";
import { step, watchdog } from "./watchdog.ts";

const { values } = parseArgs({
  options: {
    starts: { type: "string", default: "5" },
    pings: { type: "string", default: "300" },
    mib: { type: "string", default: "32" },
    requests: { type: "string", default: "100" },
    tokens: { type: "string", default: "32" },
    "limit-minutes": { type: "string", default: "15" },
  },
});
const STARTS = Number(values.starts);
const PINGS = Number(values.pings);
const MIB = Number(values.mib);
const REQUESTS = Number(values.requests);
const TOKENS = Number(values.tokens);
process.env.MESH_LLAMA_DIR = (await provideDevLlama()).dir;
const SMALL = ["--ctx-size", "512", "--llamacpp-args", "--threads 1", "--rpc-threads", "1", "--replicas", "off"];

const places = loopbackPlaces();
const transports: Transport[] = [];
const cleanup = async () => {
  await Promise.all(transports.map((t) => t.close().catch(() => undefined)));
  await places.close().catch(() => undefined);
  await killAllChildren();
};
watchdog(Number(values["limit-minutes"]) * 60_000, cleanup);

const endpoint = (line: TransportLine, onConnection: (c: PeerConnection) => void = () => undefined) =>
  Transport.start({ secretKey: Uint8Array.from(randomBytes(32)), ipv4Addr: "127.0.0.1:0", relay: "disabled", line, onConnection }).then((t) => (transports.push(t), t));

async function transportFigures(line: TransportLine) {
  const starts: number[] = [];
  for (let i = 0; i < STARTS; i++) {
    const t0 = performance.now();
    const t = await endpoint(line);
    await t.ready;
    starts.push(performance.now() - t0);
    await t.close();
  }
  let accepted: PeerConnection | undefined;
  const a = await endpoint(line, (c) => (accepted = c));
  const b = await endpoint(line);
  await Promise.all([a.ready, b.ready]);
  const conn = await b.dial(a.addr());
  const server = await waitFor(() => accepted, { what: "the connection to be accepted" });
  const stream = await conn.openStream();
  await stream.send.writeAll(new Uint8Array([1]));
  const far = await server.acceptStream();
  // The far end echoes what it is sent while it is small, and counts the rest.
  let counted = 0;
  const echo = (async () => {
    const buf = new Uint8Array(1 << 20);
    for (;;) {
      const n = await far.recv.read(buf).catch(() => null);
      if (n === null) return;
      if (counted === 0 && n <= 100) await far.send.writeAll(buf.slice(0, n));
      else counted += n;
    }
  })();
  await far.send.writeAll(new Uint8Array([1]));
  await stream.recv.readExact(new Uint8Array(1));
  const ping = new Uint8Array(100);
  const pong = new Uint8Array(100);
  const rtts: number[] = [];
  for (let i = 0; i < PINGS; i++) {
    const t0 = performance.now();
    await stream.send.writeAll(ping);
    await stream.recv.readExact(pong);
    rtts.push((performance.now() - t0) * 1000);
  }
  const chunk = new Uint8Array(1 << 20);
  const t0 = performance.now();
  for (let i = 0; i < MIB; i++) await stream.send.writeAll(chunk);
  await waitFor(() => counted >= MIB * chunk.length, { what: "the far end to have every byte", intervalMs: 1, timeoutMs: 120_000 });
  const mbps = (MIB * chunk.length) / 1e3 / (performance.now() - t0);
  await stream.send.finish();
  await echo;
  await Promise.all([a.close(), b.close()]);
  return { start: pct(starts, 50), rtt: pct(rtts, 50), mbps };
}

const rssMiB = (pid: number) => Number(/VmRSS:\s*(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0) / 1024;

async function nodeFigures(line: TransportLine) {
  const tiny = await testModel("tiny", "q8_0");
  const args = [...SMALL, "--transport", line];
  const host = await places.start([...args, "--model", "tiny-q8_0"], { models: { "tiny-q8_0.gguf": tiny } });
  const entry = await places.start([...args, "--join", host.token]);
  const body = JSON.stringify({ model: "tiny-q8_0", prompt: "hi", max_tokens: 1, temperature: 0 });
  const timed = async (url: string) => {
    const t0 = performance.now();
    const res = await fetch(`${url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body });
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`${url}: ${res.status}`);
    return performance.now() - t0;
  };
  await waitFor(async () => (await timed(entry.url).catch(() => 0)) > 0, { what: "the entry node to route to the host", timeoutMs: 120_000 });
  const direct: number[] = [];
  const forwarded: number[] = [];
  for (let i = 0; i < REQUESTS; i++) {
    direct.push(await timed(host.url));
    forwarded.push(await timed(entry.url));
  }
  const rss = rssMiB(entry.child.proc.pid);
  await Promise.all([entry.stop(), host.stop()]);
  const wide = await testModel("wide", "q8_0");
  const split = await meshSplit(places, [...SMALL, "--transport", line], wide, false, "off");
  await generate(split, TOKENS);
  const toks: number[] = [];
  for (let i = 0; i < 3; i++) toks.push(await generate(split, TOKENS));
  await split.stop();
  return { forwardedMs: pct(forwarded, 50) - pct(direct, 50), rss, splitTps: pct(toks, 50) };
}

let failed = false;
try {
  const rows: Record<TransportLine, string[]> = { iroh035: [], iroh1: [] };
  for (const line of TRANSPORT_LINES) {
    step(`${line}: endpoints, round trips, throughput`);
    const t = await transportFigures(line);
    step(`${line}: nodes: a forwarded request, RSS, a split over QUIC`);
    const n = await nodeFigures(line);
    rows[line] = [t.start.toFixed(1), t.rtt.toFixed(0), t.mbps.toFixed(0), n.forwardedMs.toFixed(2), n.splitTps.toFixed(1), n.rss.toFixed(0)];
  }
  const labels = ["endpoint start to ready, p50 (ms)", "100-byte round trip on a stream, p50 (us)", "one stream's throughput (MB/s)", "a forwarded 1-token request adds, p50 (ms)", "split of wide over QUIC only (tokens/s)", "a node's RSS in a 2-node mesh (MiB)"];
  printTable(["measure", "iroh035 (0.35.0)", "iroh1 (1.1.0)"], labels.map((l, i) => [l, rows.iroh035[i]!, rows.iroh1[i]!]));
  console.log(`\nloopback, relays off; ${STARTS} starts, ${PINGS} round trips, ${MIB} MiB, ${REQUESTS} paired requests (host direct vs through the other node), ${TOKENS} tokens x 3 per split (medians)`);
} catch (err) {
  failed = true;
  console.error(`bench transports: ${err instanceof Error ? err.message : String(err)}`);
} finally {
  await cleanup();
}
process.exit(failed ? 1 : 0);
