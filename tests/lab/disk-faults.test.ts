/**
 * Disk faults, in the lab: a models dir that fills up while a model arrives (a small tmpfs), once
 * during a copy from a peer and once during a pull from a Hugging Face Hub (fake, on the lab's
 * bridge) when something else fills the disk half-way; and model files that are corrupt (cut short,
 * garbage in the header, no GGUF magic) on nodes assigned to serve them. Each must end in a clear
 * error, with nothing half-installed, the node serving what it had, other models unaffected, and no
 * load attempted again and again without pause. Each case records a row of the fault table; the
 * test asserts correctness and generous liveness bounds only.
 */
import { afterAll, afterEach, beforeAll, expect, test } from "bun:test";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statfsSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { post } from "../helpers/api.ts";
import { killAllChildren } from "../helpers/children.ts";
import { startFakeHub, type FakeHub } from "../helpers/fake-hub.ts";
import { waitForFullMesh } from "../helpers/mesh.ts";
import { testModel } from "../helpers/models.ts";
import { SMALL_LLAMA } from "../helpers/node.ts";
import { parseScrape, valueOf } from "../helpers/prometheus.ts";
import { waitFor } from "../helpers/wait.ts";
import { FREE_SPACE_MARGIN } from "../../models/download-rules.ts";
import { PULLS_DIR, REGISTRY_FILE } from "../../models/registry.ts";
import { sh } from "./lab-net.ts";
import { faultTable, recordFault, type FaultOutcome } from "./fault-table.ts";
import { catalogEntry, describeAnswer, halfWritten, LIVENESS_MS, modelNode, seconds } from "./fault-probes.ts";
import { Lab, labUnavailable, type LabNode } from "./lab.ts";
import { ask, vramFor } from "./lab-mesh.ts";

const WIDE = "wide-q8_0";
const TINY = "tiny-q8_0";
const skip = labUnavailable();
if (skip) console.log(`lab fault tests skipped: ${skip}`);

let wide: string;
let tiny: string;
let lab: Lab | undefined;
let hub: FakeHub | undefined;
const temps: string[] = [];
const rows: FaultOutcome[] = [];
beforeAll(async () => {
  if (skip !== undefined) return;
  wide = await testModel("wide", "q8_0");
  tiny = await testModel("tiny", "q8_0");
});
afterEach(async () => {
  await lab?.close();
  lab = undefined;
  await hub?.stop();
  hub = undefined;
  for (const d of temps.splice(0)) rmSync(d, { recursive: true, force: true });
});
afterAll(async () => {
  await killAllChildren();
  if (rows.length) console.log(`\ndisk faults\n${faultTable(rows)}`);
});

function record(o: FaultOutcome): void {
  recordFault(o);
  rows.push(o);
}

const MiB = 2 ** 20;

/** A models dir on a tmpfs of `bytes`, holding tiny (what the node has and serves before the fault). */
function smallDisk(l: Lab, bytes: number): { mount: string; models: string } {
  const mount = l.tmpfs(bytes);
  const models = join(mount, "models");
  mkdirSync(models);
  copyFileSync(tiny, join(models, `${TINY}.gguf`));
  return { mount, models };
}

/** The `error=` field of a log line, unquoted, in at most `max` characters. */
function loggedError(line: string, max = 90): string {
  const m = /error=("(?:[^"\\]|\\.)*"|\S+)/.exec(line);
  let text = m?.[1] ?? line;
  try {
    if (text.startsWith('"')) text = JSON.parse(text) as string;
  } catch {
    // the logger's quoting is not JSON's here: the raw field says it too
  }
  return text.split("\n")[0]!.slice(0, max);
}

/** Lines of the node's log from `from` (a length of its output) on that match `pattern`. */
const linesAfter = (n: LabNode, from: number, pattern: RegExp) =>
  n.child
    .output()
    .slice(from)
    .split("\n")
    .filter((l) => pattern.test(l));

test.skipIf(skip !== undefined)(
  "the disk fills during a copy from a peer: a clear error, nothing installed, the node keeps serving what it had",
  async () => {
    lab = await Lab.create();
    const holder = await modelNode(lab, wide, 0.1, "holder");
    // 40 MiB: tiny fits, the 96 MB wide does not; the copy starts as soon as the node joins.
    const disk = smallDisk(lab, 40 * MiB);
    const startedAt = performance.now();
    const node = await lab.addNode([...SMALL_LLAMA, ...(await vramFor(wide, 0.1)), "--model", WIDE, "--join", holder.token], { modelsDir: disk.models, name: "small-disk" });
    const failed = await waitFor(() => linesAfter(node, 0, /could not fetch the model.*wide-q8_0/)[0], { what: "the copy to fail", timeoutMs: LIVENESS_MS, intervalMs: 100 });
    const failedMs = performance.now() - startedAt;
    // It serves what it had, through itself and through the peer.
    const local = await ask(node, TINY);
    const viaPeer = await ask(holder, TINY);
    // A while longer: how often it tries again, and whether it gives up.
    const from = node.child.output().length;
    await waitFor(async () => (await catalogEntry(node, WIDE))?.nodesOnDisk.length === 1, { what: "the catalog to list wide on the holder only" });
    await Bun.sleep(20_000); // an observation window (how often it tries again), not a wait for anything
    const retries = linesAfter(node, from, /could not fetch the model.*wide-q8_0/).length;
    const gaveUp = linesAfter(node, 0, /giving up on the assigned model/).length > 0;
    const half = await halfWritten([{ modelsDir: disk.models }], { [`${TINY}.gguf`]: tiny }, () => "small-disk");
    const orphans = await lab.terminate(node);
    const partBytes = readdirSync(join(disk.models, ".partial"), { recursive: true })
      .map((f) => join(disk.models, ".partial", String(f)))
      .filter((f) => f.endsWith(".part"))
      .reduce((sum, f) => sum + statSync(f).size, 0);
    record({
      fault: "the disk fills during a copy from a peer (40 MiB tmpfs, 96 MB model)",
      client: `log: ${loggedError(failed).replace(disk.models, "<models dir>")}; ${retries} more tries in 20 s${gaveUp ? ", then gave up" : ", no giving up"}; a ${(partBytes / MiB).toFixed(0)} MiB part left in the staging dir; tiny: ${describeAnswer(local)} here, ${describeAnswer(viaPeer)} through the peer`,
      clientMs: Math.round(failedMs),
      restoredMs: null,
      halfWritten: half,
      orphans: orphans.length,
    });

    expect(failed).toMatch(/ENOSPC|no space|disk .* is full/i);
    // A full disk is not bad luck: the node stops trying after a few failures, not never.
    expect(gaveUp).toBe(true);
    expect(failedMs).toBeLessThan(LIVENESS_MS);
    expect(existsSync(join(disk.models, `${WIDE}.gguf`))).toBe(false);
    expect(half).toEqual([]);
    expect(local.status).toBe(200);
    expect(viaPeer.status).toBe(200);
    expect(orphans).toEqual([]);
  },
  240_000,
);

test.skipIf(skip !== undefined)(
  "the disk fills during a pull from the Hub: a clear error, nothing installed, the node keeps serving what it had",
  async () => {
    lab = await Lab.create();
    const repo = "test-org/wide-GGUF";
    hub = await startFakeHub({ hostname: lab.gateway, repos: [{ repo, files: { [`${WIDE}.gguf`]: { fromFile: wide } } }] });
    // Room for wide and the margin a pull keeps free, until something else fills the disk.
    const disk = smallDisk(lab, FREE_SPACE_MARGIN + 160 * MiB);
    const node = await lab.addNode([...SMALL_LLAMA], { modelsDir: disk.models, capMbit: 64, env: { HF_ENDPOINT: hub.endpoint }, name: "pulling" });
    expect((await ask(node, TINY)).status).toBe(200);

    const pull = post(node, "/api/v1/pull", { model_name: `${repo}:Q8_0` }, { signal: AbortSignal.timeout(LIVENESS_MS * 2) });
    const staged = () => {
      const dir = join(disk.models, PULLS_DIR);
      if (!existsSync(dir)) return 0;
      return readdirSync(dir, { recursive: true })
        .map((f) => join(dir, String(f)))
        .filter((f) => f.endsWith(".part"))
        .reduce((sum, f) => sum + statSync(f).size, 0);
    };
    await waitFor(() => staged() >= statSync(wide).size / 4, { what: "a quarter of wide to arrive", timeoutMs: LIVENESS_MS, intervalMs: 50 });
    // Another program takes all the space but 4 MiB.
    const fs = statfsSync(disk.mount);
    sh(["fallocate", "-l", String(fs.bavail * fs.bsize - 4 * MiB), join(disk.mount, "filler")]);
    const filledAt = performance.now();
    const res = await pull;
    const answer = await res.text();
    const answerMs = performance.now() - filledAt;
    const after = await ask(node, TINY);
    const registry = existsSync(join(disk.models, REGISTRY_FILE)) ? readFileSync(join(disk.models, REGISTRY_FILE), "utf8") : "{}";
    const half = await halfWritten([{ modelsDir: disk.models }], { [`${TINY}.gguf`]: tiny }, () => "pulling");
    const orphans = await lab.terminate(node);
    let message = answer;
    try {
      message = (JSON.parse(answer) as { error?: { message?: string } }).error?.message ?? answer;
    } catch {
      // not JSON: the text is the message
    }
    record({
      fault: "the disk fills during a pull from the Hub (a quarter in, all but 4 MiB taken)",
      client: `${res.status}: ${message.replaceAll(disk.models, "<models dir>").slice(0, 130)}; tiny then ${describeAnswer(after)}`,
      clientMs: Math.round(answerMs),
      restoredMs: null,
      halfWritten: half,
      orphans: orphans.length,
    });

    // Insufficient storage, as when the space was missing from the start.
    expect(res.status).toBe(507);
    expect(message).toMatch(/ENOSPC|no space|does not fit|is full/i);
    expect(answerMs).toBeLessThan(LIVENESS_MS);
    expect(half).toEqual([]);
    expect(JSON.parse(registry)).not.toHaveProperty(`${repo}:Q8_0`);
    expect(after.status).toBe(200);
    expect(orphans).toEqual([]);
  },
  240_000,
);

/** How a copy of tiny is broken. */
interface Corruption {
  name: string;
  how: string;
  make(bytes: Uint8Array): Uint8Array;
}

const garbage = (n: number) => Uint8Array.from({ length: n }, (_, i) => (i * 151 + 89) & 0xff);

const CORRUPTIONS: Corruption[] = [
  { name: "broken-cut", how: "cut to half its size (GGUF magic intact)", make: (b) => b.slice(0, Math.floor(b.length / 2)) },
  {
    name: "broken-header",
    how: "garbage over its metadata (GGUF magic intact)",
    make: (b) => {
      const out = new Uint8Array(b);
      out.set(garbage(2048), 24);
      return out;
    },
  },
  {
    name: "broken-magic",
    how: "garbage over its first KiB (no GGUF magic)",
    make: (b) => {
      const out = new Uint8Array(b);
      out.set(garbage(1024), 0);
      return out;
    },
  },
];

/** Load attempts of `model` the node logged, and its load failures and nuclear evictions by /metrics. */
async function loadCounts(n: LabNode, model: string) {
  const scrape = parseScrape(await (await fetch(`${n.url}/metrics`)).text());
  return {
    attempts: linesAfter(n, 0, new RegExp(`loading model model=${model} `)).length,
    failures: valueOf(scrape, "mesh_model_load_failures_total"),
    nuclear: valueOf(scrape, "mesh_model_evictions_total", { cause: "nuclear" }),
  };
}

/** Requests a client sends in a row for each broken model. */
const BURST = 10;

/** The window over which load attempts are counted, with no requests made during it. */
const WINDOW_MS = 30_000;

test.skipIf(skip !== undefined)(
  "a corrupt model file on the node assigned to serve it: clean errors, never reported ready, other models unaffected, no reload spin",
  async () => {
    lab = await Lab.create();
    const dir = mkdtempSync(join(tmpdir(), "mesh-lab-corrupt-"));
    temps.push(dir);
    const bytes = new Uint8Array(readFileSync(tiny));
    const nodes: LabNode[] = [];
    for (const c of CORRUPTIONS) {
      const file = join(dir, `${c.name}.gguf`);
      writeFileSync(file, c.make(bytes));
      const args = [...SMALL_LLAMA, "--model", c.name, ...(nodes[0] ? ["--join", nodes[0].token] : [])];
      nodes.push(await lab.addNode(args, { models: { [`${c.name}.gguf`]: file, [`${TINY}.gguf`]: tiny }, name: c.name }));
    }
    // An entry that holds nothing and copies nothing: requests through it cross the mesh.
    const entry = await lab.addNode([...SMALL_LLAMA, "--fetch", "off", "--join", nodes[0]!.token], { name: "entry" });
    await waitForFullMesh([...nodes, entry]);
    for (const [i, c] of CORRUPTIONS.entries()) {
      await waitFor(() => linesAfter(nodes[i]!, 0, new RegExp(`could not load the assigned model.*${c.name}|${c.name}.*could not load`)).length > 0, {
        what: `${c.name}'s node to report the failed load`,
        timeoutMs: LIVENESS_MS,
      }).catch((err: Error) => {
        throw new Error(`${err.message}\n${nodes[i]!.child.output().slice(-3000)}`);
      });
    }

    const seen = await Promise.all(
      CORRUPTIONS.map(async (c, i) => {
        const n = nodes[i]!;
        const here = await ask(n, c.name, LIVENESS_MS);
        const through = await ask(entry, c.name, LIVENESS_MS);
        const listed = ((await (await fetch(`${n.url}/v1/models`)).json()) as { data: { id: string; status: string }[] }).data.find((m) => m.id === c.name);
        return { here, through, listed: listed?.status, catalog: (await catalogEntry(entry, c.name))?.status };
      }),
    );
    // A client that keeps asking: does each request start another load of the broken file?
    const burst = await Promise.all(
      CORRUPTIONS.map(async (c, i) => {
        const from = await loadCounts(nodes[i]!, c.name);
        const statuses: number[] = [];
        for (let k = 0; k < BURST; k++) statuses.push((await ask(entry, c.name, LIVENESS_MS)).status);
        return { statuses, attempts: (await loadCounts(nodes[i]!, c.name)).attempts - from.attempts };
      }),
    );
    const tinyBefore = await ask(entry, TINY, LIVENESS_MS);
    const before = await Promise.all(CORRUPTIONS.map((c, i) => loadCounts(nodes[i]!, c.name)));
    await Bun.sleep(WINDOW_MS); // an observation window (how often loads are tried), not a wait for anything
    const after = await Promise.all(CORRUPTIONS.map((c, i) => loadCounts(nodes[i]!, c.name)));
    const tinyAfter = await Promise.all(nodes.map((n) => ask(n, TINY, LIVENESS_MS)));

    for (const [i, c] of CORRUPTIONS.entries()) {
      const s = seen[i]!;
      const tries = after[i]!.attempts - before[i]!.attempts;
      const logged = linesAfter(nodes[i]!, 0, /could not load the assigned model/)[0] ?? "";
      record({
        fault: `corrupt model file: ${c.how}`,
        client: `here ${describeAnswer(s.here)} in ${seconds(s.here.ms)}, through a peer ${describeAnswer(s.through)}; listed ${s.listed}, catalog ${s.catalog}; ${tries} load attempts (${after[i]!.failures - before[i]!.failures} failures by /metrics) in ${WINDOW_MS / 1000} s idle, ${burst[i]!.attempts} for ${BURST} requests in a row (${after[i]!.nuclear - before[i]!.nuclear} nuclear evictions); log: ${loggedError(logged, 70)}`,
        clientMs: Math.round(Math.max(s.here.ms, s.through.ms)),
        restoredMs: null,
        halfWritten: [],
        orphans: 0,
      });
    }
    const orphans = (await Promise.all([...nodes, entry].map((n) => lab!.terminate(n)))).flat();
    const files = Object.fromEntries(CORRUPTIONS.map((c) => [`${c.name}.gguf`, join(dir, `${c.name}.gguf`)]));
    const half = await halfWritten(nodes, { ...files, [`${TINY}.gguf`]: tiny }, (i) => nodes[i]!.child.name);

    for (const [i, s] of seen.entries()) {
      for (const a of [s.here, s.through]) {
        // A clear error, not a hang and not an answer from a broken model.
        expect(a.status).toBeGreaterThanOrEqual(500);
        expect(a.ms).toBeLessThan(LIVENESS_MS);
        expect((JSON.parse(a.text) as { error: { message: string } }).error.message).toContain(`"${CORRUPTIONS[i]!.name}" failed to load`);
      }
      expect(s.listed).not.toBe("loaded");
      expect(s.catalog).not.toBe("ready");
      expect(linesAfter(nodes[i]!, 0, new RegExp(`model ready model=${CORRUPTIONS[i]!.name} `))).toEqual([]);
      // No spin: at most one attempt per 5 s of the window (the node may retry now and then),
      // and a client asking again and again does not start a load per request (a load of a
      // large model reads gigabytes): a few requests in a row are answered from the failure.
      expect(after[i]!.attempts - before[i]!.attempts).toBeLessThanOrEqual(WINDOW_MS / 5_000);
      expect(burst[i]!.statuses.every((st) => st >= 500)).toBe(true);
      expect(burst[i]!.attempts).toBeLessThanOrEqual(2);
    }
    expect(tinyBefore.status).toBe(200);
    for (const a of tinyAfter) expect(a.status).toBe(200);
    expect(orphans).toEqual([]);
    expect(half).toEqual([]);
  },
  240_000,
);
