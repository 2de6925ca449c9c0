/**
 * Issue 42 in the lab: a guest with more memory than any of the owner's machines, and tiny on its
 * own disk, across a partition that heals. Before: the owner's a hosts tiny; c (the owner's, no
 * files, lending memory only) asks through a. Cut a off: the guest's own client is served by the
 * guest's own node (its local serving), c's clients get a clear 503 and never the guest.
 * Healed: one mesh, and among the owner's machines one llama-server of tiny, a's, which serves
 * c's clients again; the guest's server, if it kept one, serves only its own clients.
 */
import { expect } from "bun:test";
import { SMALL_LLAMA, meshCommand } from "../../harness/node.ts";
import { waitFor } from "../../harness/wait.ts";
import { ask, probe, readyServer, statusSummary } from "./lab-mesh.ts";
import { llamaServers, peersOf } from "./lab-state.ts";
import { labSuite } from "./lab-suite.ts";

const { labTest, models: files, newLab, record } = labSuite("guest faults (tests/lab/guest-faults.test.ts)", { "tiny-q8_0.gguf": ["tiny", "q8_0"] });
const vram = (mib: number) => ["--vram", `${mib}MiB`];
const secs = (ms: number | null) => (ms === null ? "never" : `${(ms / 1000).toFixed(1)} s`);

labTest("a bigger guest serves its own client during a partition; healed, the owner's host serves the owner's clients, never the guest", async () => {
  const l = await newLab();
  const model = "tiny-q8_0";
  const own = { [`${model}.gguf`]: files[`${model}.gguf`]! };
  const a = await l.addNode([...SMALL_LLAMA, ...vram(64), "--model", model], { models: own, name: "a" });
  const c = await l.addNode([...SMALL_LLAMA, ...vram(32), "--join", a.token, "--fetch", "off"], { name: "c" });
  const pass = Bun.spawnSync([...meshCommand(), "token", "--guest", "--name", "big", "--state-dir", a.stateDir]);
  expect(pass.exitCode).toBe(0);
  const g = await l.addNode([...SMALL_LLAMA, ...vram(256), "--join", pass.stdout.toString().trim()], { models: own, name: "guest" });
  const nodes = [a, c, g];
  const ownerServers = () => llamaServers(l, model).filter((p) => p.ns !== g.ns).map((p) => nodes.find((n) => n.ns === p.ns)!.child.name);
  const meshOf = async () => (await Promise.all(nodes.map(peersOf))).every((p) => p?.length === 2);
  await waitFor(async () => (await meshOf()) && (await readyServer(a, model)) !== undefined, { what: "one mesh, a serving tiny", timeoutMs: 60_000 });
  expect((await ask(c, model)).by).toBe(a.nodeId);

  // The owner's a on one side; the owner's c and the bigger guest on the other.
  const split = await l.partition([a]);
  const cutAt = performance.now();
  await waitFor(async () => JSON.stringify(await peersOf(c)) === JSON.stringify([g.nodeId]), { what: "c to drop a", timeoutMs: 60_000 });
  const guestOwn = await probe(g, model, cutAt);
  const ownersSide: number[] = [];
  for (let i = 0; i < 4; i++) {
    const x = await ask(c, model);
    ownersSide.push(x.status);
    expect(x.by).not.toBe(g.nodeId);
  }
  const duringSplit = llamaServers(l, model).map((p) => nodes.find((n) => n.ns === p.ns)!.child.name).sort();

  const healAt = performance.now();
  await split.heal();
  let settledMs: number | null = null;
  await waitFor(
    async () => {
      if (!(await meshOf())) return false;
      if (JSON.stringify(ownerServers()) !== JSON.stringify(["a"])) return false;
      const x = await ask(c, model);
      return x.status === 200 && x.by === a.nodeId;
    },
    { what: "one mesh, a the owner's one server of tiny, serving c's clients", timeoutMs: 90_000, intervalMs: 500 },
  );
  settledMs = performance.now() - healAt;
  const after = await Promise.all([ask(a, model), ask(c, model)]);
  record({
    fault: "partition a | c + bigger guest (256 MiB, tiny on its disk), healed",
    client: `guest's own client ${statusSummary(guestOwn.statuses)} (answered by the ${guestOwn.answeredBy === g.nodeId ? "guest itself" : guestOwn.answeredBy}); c's clients ${statusSummary(ownersSide)} (never the guest); llama-servers during the cut: ${duringSplit.join(", ")}; the owner's one host a ${secs(settledMs)} after healing`,
    clientMs: guestOwn.first.atMs,
    restoredMs: settledMs,
    halfWritten: [],
    orphans: 0,
  });
  expect(guestOwn.answeredBy).toBe(g.nodeId);
  expect(ownersSide.every((s) => s === 503)).toBe(true);
  expect(after.map((x) => [x.status, x.by])).toEqual([
    [200, a.nodeId],
    [200, a.nodeId],
  ]);
});
