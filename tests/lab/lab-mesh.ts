/** What the lab tests ask of nodes: the need of a model at the test context, what a node runs, who answered. */
import { existsSync, readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { loaded, post } from "../../harness/api.ts";
import type { TestNode } from "../../harness/node.ts";
import { PARTIAL_DIR } from "../../models/model-transfer.ts";
import { PULLS_DIR, REGISTRY_FILE } from "../../models/registry.ts";
import { readGgufFacts } from "../../models/gguf-info.ts";
import { needOf } from "../../models/model-need.ts";
import { ANSWERED_BY_HEADER } from "../../mesh/mesh-headers.ts";

/** `--vram` that makes a node hold `share` of what `model` needs at the test context (512). */
export async function vramFor(model: string, share: number): Promise<string[]> {
  const need = needOf(statSync(model).size, await readGgufFacts(model), 512);
  return ["--vram", String(Math.ceil(need * share))];
}

export const modelName = (path: string) => path.split("/").pop()!.replace(/\.gguf$/, "");

/** The node's llama-server for `model` once it is ready, with its rpc workers (none: alone). */
export async function readyServer(n: TestNode, model: string): Promise<{ pid: number; rpc_workers?: string[] } | undefined> {
  return (await loaded(n)).find((s) => s.model_name === model && s.state === "ready") as { pid: number; rpc_workers?: string[] } | undefined;
}

export interface Answer {
  status: number;
  by: string | null;
  ms: number;
  text: string;
}

/** One short chat through `via`, bounded by `timeoutMs` (an abort counts as status 0: a hang). */
export async function ask(via: TestNode, model: string, timeoutMs = 30_000): Promise<Answer> {
  const started = performance.now();
  try {
    const body = { model, messages: [{ role: "user", content: "hi" }], max_tokens: 2 };
    const res = await post(via, "/v1/chat/completions", body, { signal: AbortSignal.timeout(timeoutMs) });
    const text = await res.text();
    return { status: res.status, by: res.headers.get(ANSWERED_BY_HEADER), ms: performance.now() - started, text };
  } catch (err) {
    return { status: 0, by: null, ms: performance.now() - started, text: (err as Error).message };
  }
}

/** The time the node's log gives for its fetch of `model` ("model fetched ... ms=N"). */
export async function fetchedMs(n: TestNode, model: string, timeoutMs: number): Promise<number> {
  const m = await n.child.waitForOutput(new RegExp(`model fetched.*model=${model}.*ms=(\\d+)|model fetched.*ms=(\\d+).*model=${model}`), timeoutMs);
  return Number(m[1] ?? m[2]);
}

/** Files in a models dir other than the finished models and the registry, outside its staging dirs. */
export function halfWrittenFiles(modelsDir: string, finished: readonly string[]): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, e.name);
      const rel = relative(modelsDir, path);
      if (e.isDirectory()) {
        // The staging dirs keep resumable parts by design; anything else is suspect.
        if (rel !== PARTIAL_DIR && rel !== PULLS_DIR) walk(path);
      } else if (!finished.includes(rel) && rel !== REGISTRY_FILE) found.push(rel);
    }
  };
  if (existsSync(modelsDir)) walk(modelsDir);
  return found;
}

export interface Probe {
  /** The first response after the fault, and when it came (ms after the fault). */
  first: Answer & { atMs: number };
  /** ms from the fault to the first answer (200); null if none came before the deadline. */
  restoredMs: number | null;
  /** The node that gave that answer. */
  answeredBy: string | null;
  statuses: number[];
  slowestMs: number;
}

/**
 * Asks through `via` again and again from `since` (a performance.now() of the fault) until one
 * request is answered or `deadlineMs` passed; each request is cut at `hangMs` (status 0: a hang).
 */
export async function probe(via: TestNode, model: string, since: number, opts: { deadlineMs?: number; hangMs?: number } = {}): Promise<Probe> {
  const deadline = since + (opts.deadlineMs ?? 60_000);
  const statuses: number[] = [];
  let first: Probe["first"] | undefined;
  let slowestMs = 0;
  for (;;) {
    const a = await ask(via, model, opts.hangMs ?? 60_000);
    const atMs = performance.now() - since;
    statuses.push(a.status);
    slowestMs = Math.max(slowestMs, a.ms);
    first ??= { ...a, atMs };
    if (a.status === 200) return { first, restoredMs: atMs, answeredBy: a.by, statuses, slowestMs };
    if (performance.now() > deadline) return { first, restoredMs: null, answeredBy: null, statuses, slowestMs };
    await Bun.sleep(250);
  }
}

/** How a probe's statuses read in a table: "503 ×4, 200". */
export function statusSummary(statuses: readonly number[]): string {
  const runs: [number, number][] = [];
  for (const s of statuses) {
    const last = runs[runs.length - 1];
    if (last && last[0] === s) last[1]++;
    else runs.push([s, 1]);
  }
  return runs.map(([s, n]) => `${s === 0 ? "hang" : s}${n > 1 ? ` ×${n}` : ""}`).join(", ");
}
