#!/usr/bin/env bun
/**
 * How long a node takes from `mesh --join <token> --model M` to serving M as the rest of the mesh
 * sees it (no request made to hurry it): with the file already on its disk, and with the file
 * copied from a peer over the mesh first; and a founder (the seeder) from `mesh --model M` to
 * serving M. A request through the seeder then must be answered by the joiner. The seeder has both
 * models and hosts the tiny one, so the joiner's model is one nobody serves yet.
 *
 *   bun bench/join-to-serving.ts [--runs 3] [--lab]
 *
 * `--lab` runs every node in its own network namespace of the lab (harness/lab/lab.ts): no route
 * beyond the lab's bridge, as on a LAN-only box. On loopback the machine's own routes apply, and
 * where they lead to relays that never answer (a sandbox, a firewall that drops UDP) iroh 0.35
 * waits out its 3 s probe timeout before its endpoint is up; the two tables tell these apart.
 */
import { statSync } from "node:fs";
import { parseArgs } from "node:util";
import { provideDevLlama } from "../scripts/llama-dev.ts";
import { killAllChildren } from "../harness/children.ts";
import { meshReady, TOKEN_MADE, type MeshTestNode } from "../harness/mesh.ts";
import { testModel } from "../harness/models.ts";
import { startNode, type StartNodeOptions, type TestNode } from "../harness/node.ts";
import { Lab, labUnavailable } from "../harness/lab/lab.ts";
import { waitFor } from "../harness/wait.ts";
import { pct, printTable } from "./report.ts";
import { ANSWERED_BY_HEADER } from "../mesh/mesh-headers.ts";

const { values } = parseArgs({ options: { runs: { type: "string", default: "3" }, lab: { type: "boolean", default: false } } });
const RUNS = Number(values.runs);
const why = values.lab ? labUnavailable() : undefined;
if (why) console.log(`lab: skipped, ${why}; on loopback instead`);
const lab = values.lab && !why ? await Lab.create() : undefined;
process.env.MESH_LLAMA_DIR = (await provideDevLlama()).dir;

const small = ["--ctx-size", "512", "--llamacpp-args", "--threads 1", "--rpc-threads", "1"];
const WIDE = "wide-q8_0";

/** `via`'s catalog says node `hostId` serves `model` (no request made: only the mesh's own work counts). */
async function seenServing(via: { url: string }, hostId: string, model: string): Promise<boolean> {
  const list = (await (await fetch(`${via.url}/v1/models`)).json()) as { data: { id: string; status: string; host?: string }[] };
  return list.data.some((m) => m.id === model && m.status === "loaded" && m.host === hostId);
}

async function answeredBy(via: MeshTestNode): Promise<string | null> {
  const res = await fetch(`${via.url}/v1/completions`, { method: "POST", body: JSON.stringify({ model: WIDE, prompt: "hi", max_tokens: 1 }) });
  await res.arrayBuffer();
  return res.status === 200 ? res.headers.get(ANSWERED_BY_HEADER) : null;
}

/** ms from spawn to the join token being made, to the mesh endpoint being up, and to serving the model. */
interface Times {
  token: number;
  endpoint: number;
  serving: number;
}

/** Spawns a node and times it until `seenBy` (itself when absent) sees it serve `model`, whether its endpoint is up yet or not. */
async function timedStart(args: string[], opts: StartNodeOptions, model: string, seenBy?: MeshTestNode): Promise<{ node: MeshTestNode; times: Times }> {
  const t0 = performance.now();
  const spawned = Promise.withResolvers<TestNode>();
  const up = lab ? lab.addNode(args, { ...opts, spawned: spawned.resolve }) : startNode(args, opts).then((n) => (spawned.resolve(n), meshReady(n)));
  up.catch(spawned.reject);
  const started = await spawned.promise;
  const since = () => performance.now() - t0;
  const made = await started.child.waitForOutput(TOKEN_MADE, 60_000);
  const token = since();
  const serving = waitFor(() => seenServing(seenBy ?? started, made[1]!, model), { what: `${model} to be served`, timeoutMs: 120_000, intervalMs: 20 }).then(since);
  const node = await up;
  const endpoint = since();
  return { node, times: { token, endpoint, serving: await serving } };
}

try {
  const wide = await testModel("wide", "q8_0");
  const tiny = await testModel("tiny", "q8_0");
  const founders: Times[] = [];
  const joiners = new Map<boolean, Times[]>([[true, []], [false, []]]);
  for (const hasFile of [true, false]) {
    for (let i = 0; i < RUNS; i++) {
      // A fresh seeder per run, so the joiner is always a stranger to it.
      const seeder = await timedStart([...small, "--model", "tiny-q8_0"], { models: { [`${WIDE}.gguf`]: wide, "tiny-q8_0.gguf": tiny } }, "tiny-q8_0");
      founders.push(seeder.times);
      const joiner = await timedStart([...small, "--join", seeder.node.token, "--model", WIDE], hasFile ? { models: { [`${WIDE}.gguf`]: wide } } : {}, WIDE, seeder.node);
      joiners.get(hasFile)!.push(joiner.times);
      if ((await answeredBy(seeder.node)) !== joiner.node.nodeId) throw new Error("the seeder's request was not answered by the joiner");
      await joiner.node.stop();
      await seeder.node.stop();
    }
  }
  const f = (xs: number[]) => `${Math.round(pct(xs, 50))}`;
  const row = (label: string, ts: Times[]) => [label, f(ts.map((t) => t.token)), f(ts.map((t) => t.endpoint)), f(ts.map((t) => t.serving)), f(ts.map((t) => t.serving - t.endpoint))];
  const rows = [
    row("a founder (the seeder), its --model (tiny) on its disk", founders),
    row("a joiner, its model (wide) on its disk", joiners.get(true)!),
    row(`a joiner, its model (wide) copied from a peer (${(statSync(wide).size / 2 ** 20).toFixed(1)} MiB)`, joiners.get(false)!),
  ];
  printTable(["node", "spawn -> join token (ms)", "spawn -> mesh endpoint up (ms)", "spawn -> serving, as the seeder sees it (ms)", "endpoint up -> serving (ms)"], rows);
  const where = lab ? "the lab (each node in its own network namespace, no route beyond its bridge)" : "loopback (this machine's routes)";
  console.log(`\nmedian of ${RUNS} runs each (founders: ${founders.length}); ${where}, relays off; test models tiny and wide (3 layers), Q8_0`);
} finally {
  await lab?.close();
  await killAllChildren();
}
process.exit(0);
