/**
 * kill -9 mid-transfer, in the lab: a node joins wanting the wide model (96 MB) it does not have,
 * its link capped so the copy from a peer takes seconds, and a quarter of the way through the
 * sending peer or the joining node itself is killed. With a second holder left, the joiner must
 * get the file from it; with none, it must say it waits for one; killed itself, it must leave
 * nothing half-written in place (the part stays in its staging dir) and, started again on the same
 * models dir, finish the copy. Nobody here has the memory to run wide: only the files move. Each
 * case records a row of the fault table (restored: the whole file in place on the joiner).
 */
import { expect } from "bun:test";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { meshStatus } from "../../harness/mesh.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { waitFor } from "../../harness/wait.ts";
import type { FaultOutcome } from "./fault-table.ts";
import { halfWritten, LIVENESS_MS, modelNode, orphansOf, seconds } from "./fault-probes.ts";
import type { Lab, LabNode } from "../../harness/lab/lab.ts";
import { vramFor } from "./lab-mesh.ts";
import { labSuite } from "./lab-suite.ts";
import { PARTIAL_DIR } from "../../models/model-transfer.ts";
import type { FetchProgress } from "../../node/model-fetcher.ts";

const WIDE = "wide-q8_0";
const FILE = `${WIDE}.gguf`;
/** The joiner's link: 96 MB take about 12 s at 64 Mbit/s. */
const CAP_MBIT = 64;
const { labTest, models, newLab, afterTest, record } = labSuite("kill -9 mid-transfer", { wide: ["wide", "q8_0"] });

const fetching = async (n: LabNode) => ((await meshStatus(n)) as unknown as { models: { fetching: FetchProgress | null } }).models.fetching;

/** A node without wide that is assigned it (by --model) and copies it over its capped link, into `modelsDir`. */
async function joiner(l: Lab, to: LabNode, modelsDir: string, name: string): Promise<LabNode> {
  const args = [...SMALL_LLAMA, ...(await vramFor(models.wide, 0.1)), "--model", WIDE, "--join", to.token];
  return l.addNode(args, { modelsDir, capMbit: CAP_MBIT, name });
}

/** Resolves with the copy's progress once a quarter of the file is on the joiner. */
const aQuarterIn = (j: LabNode) =>
  waitFor(async () => {
    const p = await fetching(j);
    return p && p.model === WIDE && p.total > 0 && p.bytes >= p.total / 4 ? p : undefined;
  }, { what: "a quarter of wide to arrive on the joiner", timeoutMs: LIVENESS_MS, intervalMs: 100 });

/** When the joiner logs `pattern` after `since`: the first such line from now on, timed. */
async function loggedAfter(n: LabNode, pattern: RegExp, since: number): Promise<{ ms: number; line: string }> {
  const already = n.child.output().length;
  const m = await waitFor(() => pattern.exec(n.child.output().slice(already)), { what: `${n.child.name} to log ${pattern}`, timeoutMs: LIVENESS_MS, intervalMs: 50 });
  return { ms: performance.now() - since, line: m[0] };
}

const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(0)} MiB`;

/** Polls the node's fetch progress until stopped; `stop` resolves with the least byte count above 0 it showed. */
function watchProgress(n: LabNode) {
  let least: number | undefined;
  let on = true;
  const loop = (async () => {
    while (on) {
      const p = await fetching(n).catch(() => null);
      if (p && p.model === WIDE && p.bytes > 0) least = Math.min(least ?? p.bytes, p.bytes);
      await Bun.sleep(50); // the poll's pace
    }
  })();
  return {
    stop: async () => {
      on = false;
      await loop;
      return least;
    },
  };
}

interface TransferCase {
  fault: string;
  victim: "sender" | "joiner";
  /** Holders of wide besides the sender. */
  otherHolders: number;
}

const CASES: TransferCase[] = [
  { fault: "kill -9 of the sending peer, mid-transfer (another holder left)", victim: "sender", otherHolders: 1 },
  { fault: "kill -9 of the only sending peer, mid-transfer", victim: "sender", otherHolders: 0 },
  { fault: "kill -9 of the joining node, mid-transfer (then started again)", victim: "joiner", otherHolders: 0 },
];

labTest.each(CASES.map((c) => [c.fault, c] as const))(
  "%s: nothing half-written in place; the copy completes from a holder left, or the joiner says it waits",
  async (fault, c) => {
    const lab = await newLab();
    const wide = models.wide;
    const first = await modelNode(lab, wide, 0.1, "holder-1");
    const holders = [first];
    for (let i = 0; i < c.otherHolders; i++) holders.push(await modelNode(lab, wide, 0.1, `holder-${i + 2}`, first));
    const joinerDir = mkdtempSync(join(tmpdir(), "mesh-lab-joiner-models-"));
    afterTest(() => rmSync(joinerDir, { recursive: true, force: true }));
    const j = await joiner(lab, first, joinerDir, "joiner");
    const progress = await aQuarterIn(j);
    const sender = holders.find((h) => h.nodeId === progress.from);
    expect(sender).toBeDefined();
    const victim = c.victim === "joiner" ? j : sender!;

    const killedAt = performance.now();
    await lab.kill(victim);
    let client: string;
    let clientMs: number | null = null;
    let restoredMs: number | null = null;
    if (c.victim === "sender" && c.otherHolders > 0) {
      const broke = await loggedAfter(j, /could not fetch the model; trying again.*/, killedAt);
      const fetched = await loggedAfter(j, /model fetched model=wide-q8_0.*/, killedAt);
      const resumedFrom = /fetching model model=wide-q8_0 from="?node (\S+?)"?\s/.exec(j.child.output().slice(j.child.output().lastIndexOf("fetching model model=wide-q8_0")))?.[1];
      const why = /error="?(.*?)(\\n|"|$)/.exec(broke.line)?.[1];
      client = `copy broke after ${seconds(broke.ms)} (${why}); finished from node ${resumedFrom}`;
      clientMs = broke.ms;
      restoredMs = fetched.ms;
      expect(holders.find((h) => h !== sender)!.nodeId.startsWith(resumedFrom ?? "?")).toBe(true);
    } else if (c.victim === "sender") {
      const waits = await loggedAfter(j, /waiting for the model model=wide-q8_0 .*/, killedAt);
      client = `joiner says: ${waits.line.slice(0, 120)}`;
      clientMs = waits.ms;
    } else {
      const part = join(joinerDir, PARTIAL_DIR, `${FILE}.part`);
      const partBytes = statSync(part).size;
      // Nothing in place in the dir the killed node left; then the same dir under a new node.
      expect(await halfWritten([{ modelsDir: joinerDir }], { [FILE]: wide })).toEqual([]);
      const again = await joiner(lab, first, joinerDir, "joiner-again");
      const watch = watchProgress(again);
      const fetched = await loggedAfter(again, /model fetched model=wide-q8_0.*/, killedAt);
      const resumedAt = await watch.stop();
      client = `part of ${mib(partBytes)} kept in ${PARTIAL_DIR}; started again, the copy went on from ${mib(resumedAt ?? 0)} and finished`;
      // It went on from the part: no progress it showed lay below what the part held.
      expect(resumedAt).toBeGreaterThanOrEqual(partBytes);
      restoredMs = fetched.ms;
    }
    const orphans = await orphansOf(lab, [victim]);
    const row: FaultOutcome = {
      fault,
      client,
      clientMs: clientMs === null ? null : Math.round(clientMs),
      restoredMs: restoredMs === null ? null : Math.round(restoredMs),
      // The joiner's dir is its own (a LabNode's modelsDir names the temporary one it was not given).
      halfWritten: await halfWritten([...holders, { modelsDir: joinerDir }], { [FILE]: wide }, (i) => (i < holders.length ? holders[i]!.child.name : "joiner")),
      orphans: orphans.length,
    };
    record(row);

    expect(orphans).toEqual([]);
    expect(row.halfWritten).toEqual([]);
    // Either the copy finished in time, or the joiner said in time that it waits for a holder.
    expect(restoredMs ?? clientMs).not.toBeNull();
    expect(restoredMs ?? clientMs!).toBeLessThan(LIVENESS_MS);
  },
  300_000,
);
