/**
 * kill -9 while the model loads, in the lab: wide's group is a host (0.6 of its need) and a worker
 * (0.3), short of memory, until a node joins with 0.45 and the host starts loading wide over both.
 * While that llama-server is still starting, the host, the worker or the joining node is killed,
 * with a request through a node that survives in flight. Losing the worker leaves the memory
 * (host and joiner), so the model must answer again; losing the host or the joiner does not, so
 * the mesh must say so (needs-capacity, 503 with Retry-After) instead of showing a load that no
 * longer runs. Each case records a row of the fault table; only liveness bounds are asserted.
 */
import { expect } from "bun:test";
import { waitForFullMesh } from "../../harness/mesh.ts";
import { waitFor } from "../../harness/wait.ts";
import type { FaultOutcome } from "./fault-table.ts";
import {
  catalogEntry,
  compact,
  describeAnswer,
  halfWritten,
  killDuringRequest,
  LIVENESS_MS,
  modelNode,
  orphansOf,
  seconds,
  serverOf,
  untilAnswered,
  whileLoading,
} from "./fault-probes.ts";
import { ask } from "./lab-mesh.ts";
import { labSuite } from "./lab-suite.ts";

const WIDE = "wide-q8_0";
const { labTest, models, newLab, record } = labSuite("kill -9 while loading", { wide: ["wide", "q8_0"] });

interface LoadingCase {
  fault: string;
  victim: "host" | "worker" | "joiner";
  /** The survivor the client asks through. */
  via: "host" | "worker" | "joiner";
  /** Whether the nodes left hold wide. */
  capacityLeft: boolean;
}

const CASES: LoadingCase[] = [
  { fault: "kill -9 of the host while it loads a split (no capacity left)", victim: "host", via: "worker", capacityLeft: false },
  { fault: "kill -9 of a worker while the host loads over it (capacity left)", victim: "worker", via: "joiner", capacityLeft: true },
  { fault: "kill -9 of the joining node while the host loads over it (no capacity left)", victim: "joiner", via: "worker", capacityLeft: false },
];

labTest.each(CASES.map((c) => [c.fault, c] as const))(
  "%s: the client gets an answer or a clean error, the mesh shows what runs, nothing half-written or orphaned",
  async (fault, c) => {
    const lab = await newLab();
    const wide = models.wide;
    const host = await modelNode(lab, wide, 0.6, "host");
    const worker = await modelNode(lab, wide, 0.3, "worker", host);
    await waitFor(async () => (await catalogEntry(worker, WIDE))?.status === "needs-capacity", { what: "wide to need capacity" });
    const joiner = await modelNode(lab, wide, 0.45, "joiner", host);
    const nodes = { host, worker, joiner };
    await whileLoading(host, WIDE, "the host to start loading wide over the worker and the joiner");

    const via = nodes[c.via];
    const victim = nodes[c.victim];
    const survivors = Object.values(nodes).filter((n) => n !== victim);
    // A request on its way when the node dies (through the entry, it waits for the load).
    const { killedAt, first, firstMs } = await killDuringRequest(lab, victim, via, WIDE);

    let restoredMs: number | null = null;
    let after: string;
    /** What the survivors showed when they did not settle to the truth in time (recorded, then failed). */
    let wrong: string | undefined;
    if (c.capacityLeft) {
      const restored = await untilAnswered(via, WIDE, killedAt);
      restoredMs = restored.ms;
      after = compact(restored.seen);
    } else {
      // Every survivor's catalog says what is true: no load runs, it needs capacity; requests get 503 with Retry-After.
      let seen = "";
      const settled = await waitFor(
        async () => {
          const views = await Promise.all(survivors.map(async (n) => ({ n, status: (await catalogEntry(n, WIDE))?.status, server: (await serverOf(n, WIDE))?.state })));
          seen = views.map((v) => `${v.n.child.name}: catalog ${v.status}, llama-server ${v.server ?? "none"}`).join("; ");
          return views.every((v) => v.status === "needs-capacity" && v.server === undefined);
        },
        { what: "every survivor to show wide needing capacity, with no llama-server for it", timeoutMs: LIVENESS_MS },
      ).then(
        () => true,
        () => false,
      );
      const settledMs = performance.now() - killedAt;
      const res = await ask(via, WIDE, LIVENESS_MS);
      if (settled) after = `needs-capacity shown after ${seconds(settledMs)}; then ${describeAnswer(res)}`;
      else {
        wrong = `${seconds(LIVENESS_MS)} after the kill the nodes left, short of wide's memory, show: ${seen}; a request gets ${describeAnswer(res)}`;
        after = `NOT settled: ${seen}; then ${describeAnswer(res)}`;
      }
      if (settled) expect(res.status).toBe(503);
    }
    const orphans = await orphansOf(lab, [victim]);
    const row: FaultOutcome = {
      fault,
      client: `in flight: ${describeAnswer(first)}; ${after}`,
      clientMs: Math.round(firstMs),
      restoredMs: restoredMs === null ? null : Math.round(restoredMs),
      halfWritten: await halfWritten(lab.nodes, { [`${WIDE}.gguf`]: wide }, (i) => lab.nodes[i]!.child.name),
      orphans: orphans.length,
    };
    record(row);

    if (wrong) throw new Error(`${wrong}\nhost log:\n${host.child.output().slice(-4000)}`);
    expect(first.status).not.toBe(0);
    expect(firstMs).toBeLessThan(LIVENESS_MS);
    expect(orphans).toEqual([]);
    expect(row.halfWritten).toEqual([]);
    await waitForFullMesh(survivors);
  },
  300_000,
);
