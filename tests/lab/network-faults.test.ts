/**
 * Network faults in the lab, each with real nodes in their own namespaces: a frozen host, a
 * partition that heals, a capped link during a model copy. Each test measures what a client saw
 * and when service came back (recorded in the fault table), and asserts only generous liveness
 * bounds and correctness: no hung request, one mesh and one host per model after the fault, no
 * half-written model file, no orphaned process.
 */
import { expect } from "bun:test";
import { createHash } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { waitFor } from "../../harness/wait.ts";
import { PARTIAL_DIR } from "../../models/model-transfer.ts";
import { ask, fetchedMs, halfWrittenFiles, probe, readyServer, statusSummary } from "./lab-mesh.ts";
import type { Lab, LabNode } from "../../harness/lab/lab.ts";
import { llamaServers, oneMeshOneHost, peersOf } from "./lab-state.ts";
import { labSuite } from "./lab-suite.ts";

const { labTest, models: files, newLab, record } = labSuite("network faults (tests/lab/network-faults.test.ts)", {
  "tiny-q8_0.gguf": ["tiny", "q8_0"],
  "tiny-f32.gguf": ["tiny", "f32"],
  "wide-q8_0.gguf": ["wide", "q8_0"],
});

const vram = (mib: number) => ["--vram", `${mib}MiB`];
const secs = (ms: number | null) => (ms === null ? "never" : `${(ms / 1000).toFixed(1)} s`);

/** Orphans: what still runs in each node's namespace after its mesh process was stopped by SIGTERM. */
async function orphansAfterStop(l: Lab, nodes: readonly LabNode[]): Promise<number> {
  const left = (await Promise.all(nodes.map((n) => l.terminate(n)))).flat();
  if (left.length > 0) console.log("orphans:", left);
  return left.length;
}

labTest("a host frozen for 20 s: clients through another node get a clean 503 or an answer, never a hang; after thaw, one mesh and one host", async () => {
  const l = await newLab();
  const model = "tiny-q8_0";
  const own = { [`${model}.gguf`]: files[`${model}.gguf`]! };
  const host = await l.addNode([...SMALL_LLAMA, ...vram(64), "--model", model], { models: own, name: "host" });
  const spare = await l.addNode([...SMALL_LLAMA, ...vram(48), "--join", host.token, "--model", model], { models: own, name: "spare" });
  const entry = await l.addNode([...SMALL_LLAMA, ...vram(32), "--join", host.token], { name: "entry" });
  const nodes = [host, spare, entry];
  await oneMeshOneHost(l, nodes, [model], "before the fault");
  expect((await ask(entry, model)).by).toBe(host.nodeId);

  l.freeze(host);
  const frozeAt = performance.now();
  const during = await probe(entry, model, frozeAt, { deadlineMs: 60_000, hangMs: 60_000 });
  // The rest of the 20 s frozen; requests keep getting answers or clean errors meanwhile.
  const meanwhile: number[] = [];
  while (performance.now() - frozeAt < 20_000) {
    meanwhile.push((await ask(entry, model, 60_000)).status);
    await Bun.sleep(500);
  }
  const whoDuring = nodes.find((n) => n.nodeId === during.answeredBy)?.child.name ?? during.answeredBy;
  l.thaw(host);
  const thawedAt = performance.now();
  const convergedMs = (await oneMeshOneHost(l, nodes, [model], "after the thaw")).at - thawedAt;
  const after = await Promise.all(nodes.map((n) => ask(n, model)));
  const orphans = await orphansAfterStop(l, nodes);
  record({
    fault: "host frozen (SIGSTOP) 20 s, then thawed",
    client: `${statusSummary(during.statuses)} (first in ${secs(during.first.atMs)}, slowest ${secs(during.slowestMs)}, answered by the ${whoDuring}); later ${statusSummary(meanwhile)}; one mesh and one host ${secs(convergedMs)} after the thaw`,
    clientMs: during.first.atMs,
    restoredMs: during.restoredMs,
    halfWritten: [],
    orphans,
  });
  expect([...during.statuses, ...meanwhile].every((s) => s === 200 || s === 503)).toBe(true);
  expect(during.first.atMs).toBeLessThan(60_000);
  expect(during.restoredMs).not.toBeNull();
  expect(after.map((a) => a.status)).toEqual([200, 200, 200]);
  expect(orphans).toBe(0);
});

labTest("a 2|2 partition that heals: both sides converge to one mesh, one host per model, every node answers", async () => {
  const l = await newLab();
  const [m1, m2] = ["tiny-q8_0", "tiny-f32"] as const;
  const both = { [`${m1}.gguf`]: files[`${m1}.gguf`]!, [`${m2}.gguf`]: files[`${m2}.gguf`]! };
  const a = await l.addNode([...SMALL_LLAMA, ...vram(64), "--model", m1], { models: both, name: "a" });
  const b = await l.addNode([...SMALL_LLAMA, ...vram(64), "--join", a.token, "--model", m2], { models: both, name: "b" });
  const c = await l.addNode([...SMALL_LLAMA, ...vram(32), "--join", a.token], { models: both, name: "c" });
  const d = await l.addNode([...SMALL_LLAMA, ...vram(32), "--join", a.token], { models: both, name: "d" });
  const nodes = [a, b, c, d];
  await oneMeshOneHost(l, nodes, [m1, m2], "before the partition");

  // a (m1's host) and c on one side, b (m2's host) and d on the other.
  const sides = [[a, c], [b, d]] as const;
  const split = await l.partition(sides[1]);
  const splitAt = performance.now();
  // From the cut on, each side asks for the model hosted across it, while the sides drop each other.
  const probing = Promise.all([probe(c, m2, splitAt), probe(d, m1, splitAt)]);
  await waitFor(
    async () => {
      for (const side of sides) for (const n of side) if (JSON.stringify(await peersOf(n)) !== JSON.stringify(side.filter((o) => o !== n).map((o) => o.nodeId).sort())) return false;
      return true;
    },
    { what: "each side to drop the other", timeoutMs: 60_000 },
  );
  const droppedMs = performance.now() - splitAt;
  const probes = await probing;
  const duringSplit = [m1, m2].map((m) => `${m} ×${llamaServers(l, m).length}`).join(", ");
  const healAt = performance.now();
  await split.heal();
  let converged: number | null = null;
  let failure: unknown;
  try {
    const settled = await oneMeshOneHost(l, nodes, [m1, m2], "after the partition healed");
    converged = settled.at - healAt;
    console.log(`after healing:\n${settled.timeline.join("\n")}`);
  } catch (err) {
    failure = err;
  }
  const answers = converged === null ? [] : await Promise.all(nodes.flatMap((n) => [ask(n, m1), ask(n, m2)]));
  const orphans = await orphansAfterStop(l, nodes);
  record({
    fault: "partition 2|2 (hosts on both sides), healed",
    client: `across the cut: ${probes.map((p) => statusSummary(p.statuses)).join(" / ")} (first in ${secs(Math.max(...probes.map((p) => p.first.atMs)))}); sides dropped each other in ${secs(droppedMs)}; llama-servers before healing: ${duringSplit}; one mesh, one host per model ${converged === null ? "never (60 s)" : `${secs(converged)} after healing`}`,
    clientMs: Math.max(...probes.map((p) => p.first.atMs)),
    restoredMs: converged === null ? null : healAt - splitAt + converged,
    halfWritten: [],
    orphans,
  });
  if (failure) throw failure;
  expect(probes.flatMap((p) => p.statuses).every((s) => s === 200 || s === 503)).toBe(true);
  expect(answers.map((x) => x.status)).toEqual(Array(8).fill(200));
  expect(orphans).toBe(0);
});

labTest("a link capped at 100 Mbit/s during a model copy: the copy completes, nothing half-written, the copy is served", async () => {
  const l = await newLab();
  const model = "wide-q8_0";
  const source = files[`${model}.gguf`]!;
  const seeder = await l.addNode([...SMALL_LLAMA, "--model", model], { models: { [`${model}.gguf`]: source }, name: "seeder" });
  await waitFor(async () => readyServer(seeder, model), { what: "the seeder to serve wide", timeoutMs: 60_000 });
  const startedAt = performance.now();
  const joiner = await l.addNode([...SMALL_LLAMA, "--join", seeder.token, "--model", model], { name: "joiner", capMbit: 100 });
  const ms = await fetchedMs(joiner, model, 90_000);
  const copied = join(joiner.modelsDir, `${model}.gguf`);
  const size = statSync(source).size;
  const mbps = size / 1e6 / (ms / 1000);
  const answered = await waitFor(async () => {
    const x = await ask(joiner, model);
    return x.status === 200 ? performance.now() - startedAt : undefined;
  }, { what: "the copied model to be served", timeoutMs: 60_000 });
  const sha = (p: string) => createHash("sha256").update(readFileSync(p)).digest("hex");
  const halfWritten = [
    ...halfWrittenFiles(joiner.modelsDir, [`${model}.gguf`]),
    // A finished copy leaves no part behind in the staging dir either.
    ...safeList(join(joiner.modelsDir, PARTIAL_DIR)).map((f) => `${PARTIAL_DIR}/${f}`),
  ];
  const orphans = await orphansAfterStop(l, [joiner, seeder]);
  record({
    fault: "link capped at 100 Mbit/s (tc tbf) while a joining node copies a 96 MB model",
    client: `copy ${(ms / 1000).toFixed(1)} s at ${mbps.toFixed(1)} MB/s, then answered through the joiner`,
    clientMs: answered,
    restoredMs: null,
    halfWritten,
    orphans,
  });
  expect(statSync(copied).size).toBe(size);
  expect(sha(copied)).toBe(sha(source));
  expect(halfWritten).toEqual([]);
  expect(orphans).toBe(0);
});

function safeList(dir: string): string[] {
  try {
    return readdirSync(dir, { recursive: true }).map(String);
  } catch {
    return [];
  }
}
