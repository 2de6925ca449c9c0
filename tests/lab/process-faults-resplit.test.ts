/**
 * kill -9 during a re-split, in the lab: wide runs over a host (0.55 of its need) and a worker
 * (0.52), two spares (0.52 each) wait in its group. The worker is killed, so the layout lost a
 * member and the host loads wide again over both spares; while that llama-server is still starting,
 * the host, one of the spares it is loading over, or the other is killed. Any two of the three left
 * hold wide, so the model must answer again through a survivor; nothing may be left half-written
 * and nothing may run on in a killed node's namespace. Each case records a row of the fault table;
 * only liveness bounds are asserted.
 */
import { expect } from "bun:test";
import { waitForFullMesh } from "../../harness/mesh.ts";
import { waitFor } from "../../harness/wait.ts";
import type { FaultOutcome } from "./fault-table.ts";
import { assignedOn, compact, describeAnswer, halfWritten, killDuringRequest, LIVENESS_MS, modelNode, orphansOf, serverOf, untilAnswered } from "./fault-probes.ts";
import type { LabNode } from "../../harness/lab/lab.ts";
import { readyServer } from "./lab-mesh.ts";
import { labSuite } from "./lab-suite.ts";

const WIDE = "wide-q8_0";
const { labTest, models, newLab, record } = labSuite("kill -9 during a re-split", { wide: ["wide", "q8_0"] });

interface ResplitCase {
  fault: string;
  victim: "host" | "spareA" | "spareB";
  via: "host" | "spareA" | "spareB";
}

const CASES: ResplitCase[] = [
  { fault: "kill -9 of the host during a re-split", victim: "host", via: "spareA" },
  { fault: "kill -9 of a worker joining the layout, during a re-split", victim: "spareA", via: "spareB" },
  { fault: "kill -9 of another worker joining the layout, during a re-split", victim: "spareB", via: "spareA" },
];

labTest.each(CASES.map((c) => [c.fault, c] as const))(
  "%s: the client gets an answer or a clean error, the model answers again, nothing half-written or orphaned",
  async (fault, c) => {
    const lab = await newLab();
    const wide = models.wide;
    const host = await modelNode(lab, wide, 0.55, "host");
    const worker = await modelNode(lab, wide, 0.52, "worker", host);
    await waitFor(async () => (await readyServer(host, WIDE))?.rpc_workers?.length === 2, { what: "the host to run wide over the worker", timeoutMs: 90_000 });
    const spareA = await modelNode(lab, wide, 0.52, "spareA", host);
    const spareB = await modelNode(lab, wide, 0.52, "spareB", host);
    await waitForFullMesh([host, worker, spareA, spareB]);
    for (const s of [spareA, spareB]) await waitFor(async () => (await assignedOn(s)) === WIDE, { what: `${s.child.name} to join wide's group` });
    const before = (await untilAnswered(spareA, WIDE, performance.now(), 90_000)).answer;
    const running = await readyServer(host, WIDE);
    expect(running?.rpc_workers).toHaveLength(2);

    // The layout loses its worker: the host loads wide again over the spares (and its own rpc-server).
    await lab.kill(worker);
    const nodes = { host, spareA, spareB };
    await waitFor(
      async () => {
        const s = await serverOf(host, WIDE);
        return s?.state === "starting" && s.rpc_workers?.length === 3;
      },
      { what: "the host to start loading wide over both spares", timeoutMs: LIVENESS_MS, intervalMs: 20 },
    );

    const via = nodes[c.via];
    const victim = nodes[c.victim];
    const survivors = Object.values(nodes).filter((n) => n !== victim);
    const { killedAt, first, firstMs } = await killDuringRequest(lab, victim, via, WIDE);
    const restored = await untilAnswered(via, WIDE, killedAt);
    const orphans = await orphansOf(lab, [worker, victim]);
    const row: FaultOutcome = {
      fault,
      client: `in flight: ${describeAnswer(first)}; then ${compact(restored.seen)}`,
      clientMs: Math.round(firstMs),
      restoredMs: Math.round(restored.ms),
      halfWritten: await halfWritten(lab.nodes, { [`${WIDE}.gguf`]: wide }, (i) => lab.nodes[i]!.child.name),
      orphans: orphans.length,
    };
    record(row);

    expect(before.status).toBe(200);
    expect(first.status).not.toBe(0);
    expect(firstMs).toBeLessThan(LIVENESS_MS);
    expect(restored.ms).toBeLessThan(LIVENESS_MS);
    expect(orphans).toEqual([]);
    expect(row.halfWritten).toEqual([]);
    await waitForFullMesh(survivors as LabNode[]);
  },
  300_000,
);
