/**
 * kill -9 mid-stream, in the lab: the wide model runs split over a host and a worker, with a spare
 * in its group, each node in its own namespace; a streaming chat through the spare is in flight
 * when the host, the worker, or a node that is just joining is killed. The client must see the
 * stream end in a way it can detect (an error event, or no `[DONE]`), never a hang; the model must
 * answer again on the nodes left (losing any one node leaves the memory it needs); nothing is left
 * half-written and nothing runs on in the killed node's namespace. Each case records a row of the
 * fault table: the goals (an error within 10 s, service back within 15 s) are measured there, the
 * test asserts only a generous liveness bound.
 */
import { expect } from "bun:test";
import { waitForFullMesh } from "../../harness/mesh.ts";
import { waitFor } from "../../harness/wait.ts";
import type { FaultOutcome } from "./fault-table.ts";
import { assignedOn, compact, describeStreamEnd, halfWritten, LIVENESS_MS, modelNode, openStream, orphansOf, untilAnswered } from "./fault-probes.ts";
import type { Lab, LabNode } from "../../harness/lab/lab.ts";
import { readyServer } from "./lab-mesh.ts";
import { labSuite } from "./lab-suite.ts";

const WIDE = "wide-q8_0";
const { labTest, models, newLab, record } = labSuite("kill -9 mid-stream", { wide: ["wide", "q8_0"] });

const wideNode = (l: Lab, share: number, name: string, join?: LabNode) => modelNode(l, models.wide, share, name, join);

/**
 * The host (0.55 of wide's need) runs wide over the worker (0.52); the spare (0.52) joins after:
 * the running layout has the memory, so the spare only waits in the group. Any two of the three hold wide.
 */
async function splitWithSpare(l: Lab) {
  const host = await wideNode(l, 0.55, "host");
  const worker = await wideNode(l, 0.52, "worker", host);
  await waitFor(async () => (await readyServer(host, WIDE))?.rpc_workers?.length === 2, { what: "the host to run wide over the worker", timeoutMs: 90_000 });
  const spare = await wideNode(l, 0.52, "spare", host);
  await waitForFullMesh([host, worker, spare]);
  await waitFor(async () => (await assignedOn(spare)) === WIDE, { what: "the spare to join wide's group" });
  await untilAnswered(spare, WIDE, performance.now(), 90_000);
  return { host, worker, spare };
}

interface StreamCase {
  fault: string;
  /** Which node dies; the stream goes through the spare, which survives every case. */
  victim: "host" | "worker" | "joiner";
}

const CASES: StreamCase[] = [
  { fault: "kill -9 of the host, mid-stream (split over 2, a spare left)", victim: "host" },
  { fault: "kill -9 of a worker, mid-stream (split over 2, a spare left)", victim: "worker" },
  { fault: "kill -9 of a joining node, mid-stream", victim: "joiner" },
];

labTest.each(CASES.map((c) => [c.fault, c] as const))(
  "%s: the stream ends in a way the client detects, the model answers again, nothing half-written or orphaned",
  async (fault, c) => {
    const lab = await newLab();
    const mesh = await splitWithSpare(lab);
    let victim: LabNode;
    if (c.victim === "joiner") {
      // It has wide on disk and the group has the memory: it joins the group as a second spare.
      victim = await wideNode(lab, 0.52, "joiner", mesh.host);
      await waitFor(async () => (await assignedOn(victim)) === WIDE, { what: "the joining node to be assigned wide" });
    } else victim = mesh[c.victim];
    const stream = await openStream(mesh.spare, WIDE);

    const killedAt = performance.now();
    await lab.kill(victim);
    const end = await stream.end(killedAt);
    // A stream that was over before the kill would measure nothing: the case must fail, not pass.
    expect(end.ms).toBeGreaterThan(0);
    const restored = await untilAnswered(mesh.spare, WIDE, killedAt);
    const orphans = await orphansOf(lab, [victim]);
    const row: FaultOutcome = {
      fault,
      client: `${describeStreamEnd(end)}; then ${compact(restored.seen)}`,
      clientMs: Math.round(end.ms),
      // Nothing the stream used died: there was no service to restore.
      restoredMs: c.victim === "joiner" ? null : Math.round(restored.ms),
      halfWritten: await halfWritten(lab.nodes, { [`${WIDE}.gguf`]: models.wide }, (i) => lab.nodes[i]!.child.name),
      orphans: orphans.length,
    };
    record(row);

    expect(end.how).not.toBe("no end");
    // The stream ran on the host and the worker: the client must be able to tell it was cut short.
    // A node that only joined the group takes nothing from a running stream.
    if (c.victim === "joiner") expect(end.how).toBe("completed");
    else expect(["error event", "cut"]).toContain(end.how);
    expect(end.ms).toBeLessThan(LIVENESS_MS);
    expect(restored.ms).toBeLessThan(LIVENESS_MS);
    expect(orphans).toEqual([]);
    expect(row.halfWritten).toEqual([]);
  },
  300_000,
);
