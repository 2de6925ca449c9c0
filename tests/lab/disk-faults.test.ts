/**
 * Disk faults, in the lab: a models dir too small for a model a peer copies (refused before a byte
 * is written), and one that fills up during a pull from a Hugging Face Hub (fake, on the lab's
 * bridge) when something else fills the disk half-way; and model files that are corrupt (cut short,
 * garbage in the header, no GGUF magic) on nodes assigned to serve them. Each must end in a clear
 * error, with nothing half-installed, the node serving what it had, other models unaffected, and no
 * load started by each request for a broken file. Each case records a row of the fault table; the
 * test asserts correctness and generous liveness bounds only.
 */
import { expect } from "bun:test";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statfsSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { post } from "../../harness/api.ts";
import { startFakeHub } from "../../harness/fake-hub.ts";
import { waitForFullMesh } from "../../harness/mesh.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { parseScrape, valueOf } from "../../harness/prometheus.ts";
import { waitFor } from "../../harness/wait.ts";
import { FREE_SPACE_MARGIN } from "../../models/download-rules.ts";
import { PULLS_DIR, REGISTRY_FILE } from "../../models/registry.ts";
import { sh } from "../../harness/lab/lab-net.ts";
import { catalogEntry, describeAnswer, halfWritten, LIVENESS_MS, modelNode, seconds } from "./fault-probes.ts";
import type { Lab, LabNode } from "../../harness/lab/lab.ts";
import { ask, vramFor } from "./lab-mesh.ts";
import { labSuite } from "./lab-suite.ts";

const WIDE = "wide-q8_0";
const TINY = "tiny-q8_0";
const { labTest, models, newLab, afterTest, record } = labSuite("disk faults", { wide: ["wide", "q8_0"], tiny: ["tiny", "q8_0"] });

const MiB = 2 ** 20;

/** A models dir on a tmpfs of `bytes`, holding tiny (what the node has and serves before the fault). */
function smallDisk(l: Lab, bytes: number): { mount: string; models: string } {
  const mount = l.tmpfs(bytes);
  const dir = join(mount, "models");
  mkdirSync(dir);
  copyFileSync(models.tiny, join(dir, `${TINY}.gguf`));
  return { mount, models: dir };
}

/** Every file under `dir` (its staging dirs too) whose name holds `name`, with its size. */
function filesNamed(dir: string, name: string): { path: string; bytes: number }[] {
  return readdirSync(dir, { recursive: true })
    .map(String)
    .filter((f) => f.split("/").pop()!.includes(name) && statSync(join(dir, f)).isFile())
    .map((f) => ({ path: f, bytes: statSync(join(dir, f)).size }));
}

/** A field of a log line (`error=` unless named), unquoted, in at most `max` characters. */
function loggedField(line: string, field = "error", max = 90): string {
  const m = new RegExp(`${field}=("(?:[^"\\\\]|\\\\.)*"|\\S+)`).exec(line);
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

labTest(
  "a copy from a peer that the disk cannot hold: a clear error, the node gives up, nothing of it is left, and it keeps serving what it had",
  async () => {
    const lab = await newLab();
    const holder = await modelNode(lab, models.wide, 0.1, "holder");
    // 40 MiB: tiny fits, the 96 MB wide does not. The copy checks the peer's list against the free
    // space (less its margin) before a byte is written; a disk that fills during a transfer is the
    // pull case below (the same part-file path).
    const disk = smallDisk(lab, 40 * MiB);
    const startedAt = performance.now();
    const node = await lab.addNode([...SMALL_LLAMA, ...(await vramFor(models.wide, 0.1)), "--model", WIDE, "--join", holder.token], { modelsDir: disk.models, name: "small-disk" });
    // A full disk is not bad luck: trying again cannot help, so the node gives up (at once) and says why.
    const gaveUp = await waitFor(() => linesAfter(node, 0, /giving up on the assigned model.*wide-q8_0.*|wide-q8_0.*giving up on the assigned model.*/)[0], {
      what: "the node to give up on wide",
      timeoutMs: LIVENESS_MS,
      intervalMs: 100,
    }).catch((err: Error) => {
      throw new Error(`${err.message}\nsmall-disk log:\n${node.child.output().slice(-3000)}`);
    });
    const gaveUpMs = performance.now() - startedAt;
    const tries = linesAfter(node, 0, /fetching model model=wide-q8_0/).length;
    await waitFor(async () => (await catalogEntry(node, WIDE))?.nodesOnDisk.length === 1, { what: "the catalog to list wide on the holder only" });
    // It serves what it had, through itself and through the peer.
    const local = await ask(node, TINY);
    const viaPeer = await ask(holder, TINY);
    const half = await halfWritten([{ modelsDir: disk.models }], { [`${TINY}.gguf`]: models.tiny }, () => "small-disk");
    const orphans = await lab.terminate(node);
    // Nothing of wide anywhere in the dir, its staging dirs included: the disk is freed, no part kept.
    const left = filesNamed(disk.models, WIDE);
    const why = loggedField(gaveUp, "why", 1_000).replaceAll(disk.models, "<models dir>");
    record({
      fault: "a copy from a peer larger than the disk's free space (40 MiB tmpfs, 96 MB model)",
      client: `log: gave up after ${tries} ${tries === 1 ? "try" : "tries"}: ${why.slice(0, 140)}; ${left.length ? `left: ${left.map((f) => `${f.path} (${(f.bytes / MiB).toFixed(0)} MiB)`).join(", ")}` : "nothing of it left"}; tiny: ${describeAnswer(local)} here, ${describeAnswer(viaPeer)} through the peer`,
      clientMs: Math.round(gaveUpMs),
      restoredMs: null,
      halfWritten: half,
      orphans: orphans.length,
    });

    expect(why).toMatch(/more than the free space|ENOSPC|no space|disk .* is full/i);
    expect(gaveUpMs).toBeLessThan(LIVENESS_MS);
    expect(left).toEqual([]);
    expect(half).toEqual([]);
    expect(local.status).toBe(200);
    expect(viaPeer.status).toBe(200);
    expect(orphans).toEqual([]);
  },
  240_000,
);

labTest(
  "the disk fills during a pull from the Hub: a clear error, nothing installed, the node keeps serving what it had",
  async () => {
    const lab = await newLab();
    const { wide, tiny } = models;
    const repo = "test-org/wide-GGUF";
    const hub = await startFakeHub({ hostname: lab.gateway, repos: [{ repo, files: { [`${WIDE}.gguf`]: { fromFile: wide } } }] });
    afterTest(() => hub.stop());
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

/** Loads the node started, by /metrics: those that finished and those that failed; and its nuclear evictions. */
async function loadCounts(n: LabNode) {
  const scrape = parseScrape(await (await fetch(`${n.url}/metrics`)).text());
  const failures = valueOf(scrape, "mesh_model_load_failures_total");
  return { loads: valueOf(scrape, "mesh_model_loads_total") + failures, nuclear: valueOf(scrape, "mesh_model_evictions_total", { cause: "nuclear" }) };
}

/** The node's log lines for its own (scheduled) loads of `model` that failed. */
const failedLoads = (n: LabNode, model: string) => linesAfter(n, 0, new RegExp(`could not load the assigned model.*${model}|${model}.*could not load`));

/** Requests a client sends in a row for each broken model. */
const BURST = 10;

labTest(
  "a corrupt model file on the node assigned to serve it: clean errors, listed failed, other models unaffected, no load per request",
  async () => {
    const lab = await newLab();
    const tiny = models.tiny;
    const dir = mkdtempSync(join(tmpdir(), "mesh-lab-corrupt-"));
    afterTest(() => rmSync(dir, { recursive: true, force: true }));
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
    /** Waits until the node of CORRUPTIONS[i] has logged `count` failed loads of its own. */
    const failedTimes = (i: number, count: number, what: string) =>
      waitFor(() => failedLoads(nodes[i]!, CORRUPTIONS[i]!.name).length >= count, { what, timeoutMs: LIVENESS_MS }).catch((err: Error) => {
        throw new Error(`${err.message}\n${nodes[i]!.child.output().slice(-3000)}`);
      });
    for (const [i, c] of CORRUPTIONS.entries()) await failedTimes(i, 1, `${c.name}'s node to report the failed load`);

    const seen = await Promise.all(
      CORRUPTIONS.map(async (c, i) => {
        const n = nodes[i]!;
        const here = await ask(n, c.name, LIVENESS_MS);
        const through = await ask(entry, c.name, LIVENESS_MS);
        const listed = ((await (await fetch(`${n.url}/v1/models`)).json()) as { data: { id: string; status: string }[] }).data.find((m) => m.id === c.name);
        return { here, through, listed: listed?.status, catalog: (await catalogEntry(entry, c.name))?.status };
      }),
    );
    // A client that keeps asking: does each request start another load of the broken file? The
    // burst follows the node's own retry (10 s after the first failure), so the next one it
    // schedules (20 s on) cannot fall into it: every load counted in it was started by a request.
    const burst = await Promise.all(
      CORRUPTIONS.map(async (c, i) => {
        await failedTimes(i, 2, `${c.name}'s node to try its load again on its own`);
        const retried = failedLoads(nodes[i]!, c.name)[1]!;
        const from = await loadCounts(nodes[i]!);
        const statuses: number[] = [];
        for (let k = 0; k < BURST; k++) statuses.push((await ask(entry, c.name, LIVENESS_MS)).status);
        const to = await loadCounts(nodes[i]!);
        return { statuses, loads: to.loads - from.loads, nuclear: to.nuclear - from.nuclear, nextTry: /next_try_in_s=(\d+)/.exec(retried)?.[1] };
      }),
    );
    const tinyAfter = await Promise.all([entry, ...nodes].map((n) => ask(n, TINY, LIVENESS_MS)));

    for (const [i, c] of CORRUPTIONS.entries()) {
      const s = seen[i]!;
      const b = burst[i]!;
      const logged = failedLoads(nodes[i]!, c.name)[0] ?? "";
      record({
        fault: `corrupt model file: ${c.how}`,
        client: `here ${describeAnswer(s.here)} in ${seconds(s.here.ms)}, through a peer ${describeAnswer(s.through)}; listed ${s.listed}, catalog ${s.catalog}; tried again on its own, next in ${b.nextTry ?? "?"} s; ${b.loads} loads for ${BURST} requests in a row (${b.nuclear} nuclear evictions); log: ${loggedField(logged, "error", 70)}`,
        clientMs: Math.round(Math.max(s.here.ms, s.through.ms)),
        restoredMs: null,
        halfWritten: [],
        orphans: 0,
      });
    }
    const orphans = (await Promise.all([...nodes, entry].map((n) => lab.terminate(n)))).flat();
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
      expect(s.catalog).toBe("failed");
      expect(linesAfter(nodes[i]!, 0, new RegExp(`model ready model=${CORRUPTIONS[i]!.name} `))).toEqual([]);
      // A client asking again and again does not start a load per request (a load of a large
      // model reads gigabytes): requests are answered from the failure. How often the node tries
      // on its own (10 s, doubling to 5 min) is the schedule's, unit-tested in placement.test.ts.
      expect(burst[i]!.statuses.every((st) => st >= 500)).toBe(true);
      expect(burst[i]!.loads).toBe(0);
    }
    for (const a of tinyAfter) expect(a.status).toBe(200);
    expect(orphans).toEqual([]);
    expect(half).toEqual([]);
  },
  240_000,
);
