#!/usr/bin/env bun
/**
 * Mesh membership at several sizes, with real node processes (the compiled `mesh`) on loopback:
 * time from the last join to a full mesh, control traffic per peer at rest (all loopback bytes
 * while only the mesh runs, divided among the pairs), and resident memory per idle node. For 5
 * nodes also how long a graceful exit and a kill -9 take to leave every view.
 *
 *   bun bench/mesh-formation.ts [--sizes 2,5,10,20] [--rest-seconds 10]
 *
 * Goals: 10 nodes meshed within 3 s; <= 1 KB/s of control traffic per peer at rest; <= 150 MB RSS
 * per idle node. Loopback only, relays off; every node is stopped at the end.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { provideDevLlama } from "../scripts/llama-dev.ts";
import { printTable } from "./report.ts";
import { rssMiB } from "./rss.ts";
import { killAllChildren, spawnChild } from "../harness/children.ts";
import { meshReady, meshStatus, startMeshNode, TOKEN_MADE, type MeshTestNode } from "../harness/mesh.ts";
import { startNode } from "../harness/node.ts";
import { waitFor } from "../harness/wait.ts";

const { values } = parseArgs({ options: { sizes: { type: "string", default: "2,5,10,20" }, "rest-seconds": { type: "string", default: "10" } } });
const SIZES = values.sizes!.split(",").map(Number);
const REST_SECONDS = Number(values["rest-seconds"]);

process.env.MESH_LLAMA_DIR = (await provideDevLlama()).dir;
const buildDir = mkdtempSync(join(tmpdir(), "mesh-bench-bin-"));
const binary = join(buildDir, "mesh");
const build = spawnChild("build", [process.execPath, join(import.meta.dir, "..", "scripts", "build.ts"), "--outfile", binary]);
if ((await build.proc.exited) !== 0) throw new Error(`build failed:\n${build.output()}`);

function loopbackBytes(): number {
  const line = readFileSync("/proc/net/dev", "utf8").split("\n").find((l) => l.trim().startsWith("lo:"));
  return Number(line!.split(":")[1]!.trim().split(/\s+/)[0]);
}

async function fullMesh(nodes: readonly MeshTestNode[]): Promise<void> {
  await waitFor(
    async () => {
      const counts = await Promise.all(nodes.map(async (n) => (await meshStatus(n)).peers.length));
      return counts.every((c) => c === nodes.length - 1);
    },
    { what: `full mesh of ${nodes.length}`, timeoutMs: 120_000, intervalMs: 20 },
  );
}

async function gone(nodes: readonly MeshTestNode[], id: string): Promise<void> {
  await waitFor(async () => (await Promise.all(nodes.map(meshStatus))).every((s) => s.peers.every((p) => p.nodeId !== id)), {
    what: "a node to leave every view",
    timeoutMs: 60_000,
    intervalMs: 20,
  });
}

const start = (args: string[] = []) => startMeshNode(args, { command: [binary] });

/** A founder, and ms from its spawn to its join token being made and to its endpoint being up. */
async function startFounder(): Promise<{ founder: MeshTestNode; tokenMs: number; endpointMs: number }> {
  const t0 = performance.now();
  const started = await startNode([], { command: [binary] });
  const since = () => performance.now() - t0;
  const [tokenMs, founder] = await Promise.all([started.child.waitForOutput(TOKEN_MADE, 60_000).then(since), meshReady(started)]);
  return { founder, tokenMs, endpointMs: since() };
}
const rows: string[][] = [];
let leaveMs = NaN;
let killMs = NaN;
try {
  for (const size of SIZES) {
    const { founder, tokenMs, endpointMs } = await startFounder();
    const joiners: MeshTestNode[] = await Promise.all(Array.from({ length: size - 1 }, () => start(["--join", founder.token])));
    // Every joiner has logged "mesh endpoint up" by now: its join is under way.
    const lastJoin = performance.now();
    const nodes = [founder, ...joiners];
    await fullMesh(nodes);
    const meshMs = performance.now() - lastJoin;

    const before = loopbackBytes();
    const t0 = performance.now();
    await Bun.sleep(REST_SECONDS * 1000);
    const bytesPerSecond = (loopbackBytes() - before) / ((performance.now() - t0) / 1000);
    const pairs = (size * (size - 1)) / 2;
    const perPeer = pairs ? bytesPerSecond / pairs / 2 : 0; // each pair's bytes, as seen by each of its two ends
    const rss = nodes.map((n) => rssMiB(n.child.proc.pid) ?? 0);

    if (size === 5) {
      const [leaver, victim, ...rest] = joiners as [MeshTestNode, MeshTestNode, ...MeshTestNode[]];
      let t = performance.now();
      leaver.child.proc.kill("SIGTERM");
      await gone([founder, victim, ...rest], leaver.nodeId);
      leaveMs = performance.now() - t;
      t = performance.now();
      victim.child.proc.kill("SIGKILL");
      await gone([founder, ...rest], victim.nodeId);
      killMs = performance.now() - t;
    }
    await Promise.all(nodes.map((n) => n.stop()));
    rows.push([
      String(size),
      tokenMs.toFixed(0),
      endpointMs.toFixed(0),
      meshMs.toFixed(0),
      (bytesPerSecond / size).toFixed(0),
      perPeer.toFixed(0),
      Math.max(...rss).toFixed(0),
      (rss.reduce((a, b) => a + b, 0) / rss.length).toFixed(0),
    ]);
  }
} finally {
  await killAllChildren();
  rmSync(buildDir, { recursive: true, force: true });
}

const header = ["nodes", "founder: spawn -> join token (ms)", "spawn -> endpoint up (ms)", "last join -> full mesh (ms)", "control B/s per node", "B/s per peer", "max RSS (MiB)", "mean RSS (MiB)"];
printTable(header, rows, "right");
console.log(`\n5 nodes: graceful exit gone from every view in ${leaveMs.toFixed(0)} ms; kill -9 gone in ${killMs.toFixed(0)} ms`);
console.log(`traffic: all loopback bytes over ${REST_SECONDS} s at rest (QUIC headers, acks and heartbeats included)`);
console.log("goals: 10 nodes meshed within 3 s; <= 1024 B/s per peer at rest; <= 150 MiB RSS per idle node");
