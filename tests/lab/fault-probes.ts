/**
 * What a fault test measures around a fault, the same way in every file: how a streaming answer in
 * flight ended, what a client asking at the moment of the fault got and how fast, when the model
 * answered again, which files were left half-written in a models dir, and which processes were left
 * in the namespaces of the nodes killed. Figures are measured and recorded; tests assert only
 * generous liveness bounds and correctness with them.
 */
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { post, type LoadedServer } from "../../harness/api.ts";
import { meshStatus } from "../../harness/mesh.ts";
import { SMALL_LLAMA, type TestNode } from "../../harness/node.ts";
import { waitFor } from "../../harness/wait.ts";
import type { CatalogModel } from "../../placement/catalog.ts";
import type { Lab, LabNode } from "../../harness/lab/lab.ts";
import { ask, halfWrittenFiles, vramFor, type Answer } from "./lab-mesh.ts";

import { LIVENESS_MS } from "../../harness/stream-end.ts";

export { describeStreamEnd, LIVENESS_MS, openStream, type StreamEnd } from "../../harness/stream-end.ts";

export const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** An answer in a few words: `200 from 3f2a…`, `503 model_not_ready`, `no answer (aborted)`. */
export function describeAnswer(a: Answer): string {
  if (a.status === 0) return `no answer (${a.text.slice(0, 80)})`;
  if (a.status === 200) return `200${a.by ? ` from ${a.by.slice(0, 8)}` : ""}`;
  let code = "";
  try {
    code = ` ${(JSON.parse(a.text) as { error?: { code?: string } }).error?.code ?? ""}`;
  } catch {
    // not JSON: the status says enough
  }
  return `${a.status}${code.trimEnd()}`;
}

export interface Restored {
  /** From `since` to the first 200. */
  ms: number;
  /** What each try got, in order (status or "no answer"). */
  seen: string[];
  answer: Answer;
}

/**
 * Asks `model` through `via` until it answers 200, from `since`, for up to `limitMs`; every try is
 * bounded too, so a hang fails the wait rather than blocking it. Throws with what it saw.
 */
export async function untilAnswered(via: TestNode, model: string, since: number, limitMs = LIVENESS_MS): Promise<Restored> {
  const seen: string[] = [];
  for (;;) {
    const left = since + limitMs - performance.now();
    const a = await ask(via, model, Math.max(1_000, left));
    seen.push(describeAnswer(a));
    if (a.status === 200) return { ms: performance.now() - since, seen, answer: a };
    if (performance.now() - since > limitMs) throw new Error(`${model} did not answer through ${via.url} within ${seconds(limitMs)}; tries saw: ${compact(seen)}`);
    await Bun.sleep(250); // the poll's pace, not a wait for anything
  }
}

/** `503 x, 503 x, 200` as `503 x ×2, 200`. */
export function compact(seen: readonly string[]): string {
  const out: string[] = [];
  let i = 0;
  while (i < seen.length) {
    let j = i;
    while (j < seen.length && seen[j] === seen[i]) j++;
    out.push(j - i > 1 ? `${seen[i]} ×${j - i}` : seen[i]!);
    i = j;
  }
  return out.join(", ");
}

/** Kills `victim` while a request for `model` through `via` is on its way: what that request got, and when from the kill. */
export async function killDuringRequest(lab: Lab, victim: LabNode, via: TestNode, model: string): Promise<{ killedAt: number; first: Answer; firstMs: number }> {
  const inFlight = ask(via, model, LIVENESS_MS);
  const killedAt = performance.now();
  await lab.kill(victim);
  const first = await inFlight;
  return { killedAt, first, firstMs: performance.now() - killedAt };
}

/** The processes left in the namespaces of the nodes killed, after they had `graceMs` to go (pdeathsig is immediate). */
export async function orphansOf(lab: Lab, killed: readonly LabNode[], graceMs = 10_000): Promise<{ ns: string; pid: number; cmd: string }[]> {
  const spaces = new Set(killed.map((n) => n.ns));
  const left = () => lab.processesLeft().filter((p) => spaces.has(p.ns));
  await waitFor(() => left().length === 0, { what: "the killed nodes' processes to be gone", timeoutMs: graceMs }).catch(() => undefined);
  return left();
}

const digests = new Map<string, string>();
async function sha256Of(path: string): Promise<string> {
  const key = `${path}:${statSync(path).size}:${statSync(path).mtimeMs}`;
  let d = digests.get(key);
  if (!d) {
    const h = new Bun.CryptoHasher("sha256");
    for await (const chunk of Bun.file(path).stream()) h.update(chunk);
    d = h.digest("hex");
    digests.set(key, d);
  }
  return d;
}

/**
 * Files left half-written in the nodes' models dirs: anything but the registry and the finished
 * models (`complete`: name in the dir → the file it must equal), outside the staging dirs; and a
 * finished model's file in place whose bytes are not that file's.
 */
export async function halfWritten(nodes: readonly Pick<TestNode, "modelsDir">[], complete: Record<string, string>, label = (n: number) => `node ${n}`): Promise<string[]> {
  const found: string[] = [];
  for (const [i, n] of nodes.entries()) {
    for (const f of halfWrittenFiles(n.modelsDir, Object.keys(complete))) found.push(`${label(i)}: ${f}`);
    for (const [name, source] of Object.entries(complete)) {
      const here = join(n.modelsDir, name);
      if (!existsSync(here)) continue;
      const size = statSync(here).size;
      if (size !== statSync(source).size || (await sha256Of(here)) !== (await sha256Of(source))) found.push(`${label(i)}: ${name} (${size} of ${statSync(source).size} bytes, not the model's bytes)`);
    }
  }
  return found;
}

/** The model's entry in the catalog `n` works out. */
export async function catalogEntry(n: TestNode, model: string): Promise<CatalogModel | undefined> {
  const s = (await meshStatus(n)) as unknown as { models: { catalog: CatalogModel[] } };
  return s.models.catalog.find((m) => m.name === model);
}

export const assignedOn = async (n: TestNode): Promise<string | null> => ((await meshStatus(n)) as unknown as { models: { assigned: string | null } }).models.assigned;

/** The node's server for `model` as its health lists it (any state), with the workers it loads over. */
export async function serverOf(n: TestNode, model: string): Promise<(LoadedServer & { rpc_workers?: string[] }) | undefined> {
  const res = await fetch(`${n.url}/api/v1/health`, { signal: AbortSignal.timeout(10_000) });
  const all = ((await res.json()) as { all_models_loaded: (LoadedServer & { rpc_workers?: string[] })[] }).all_models_loaded;
  return all.find((s) => s.model_name === model);
}

/** Waits, polling fast, until `n` is loading `model` (its llama-server is up and not ready yet), beyond `notPid` when given. */
export async function whileLoading(n: TestNode, model: string, what: string, notPid?: number, timeoutMs = LIVENESS_MS): Promise<LoadedServer> {
  return waitFor(
    async () => {
      const s = await serverOf(n, model);
      return s && s.state === "starting" && s.pid !== notPid ? s : undefined;
    },
    { what, timeoutMs, intervalMs: 20 },
  );
}

/** A lab node with `model` on its disk and `--model` it, offering `share` of what the model needs at the test context. */
export async function modelNode(lab: Lab, model: string, share: number, name: string, join?: LabNode, extra: string[] = []): Promise<LabNode> {
  const file = model.split("/").pop()!;
  const args = [...SMALL_LLAMA, ...(await vramFor(model, share)), "--model", file.replace(/\.gguf$/, ""), ...(join ? ["--join", join.token] : []), ...extra];
  return lab.addNode(args, { models: { [file]: model }, name });
}
