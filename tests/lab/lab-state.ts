/**
 * What a lab mesh looks like at one moment, from processes and from what nodes say: who lists whom,
 * where each model's llama-server runs, which nodes call it ready. Fault tests wait for one mesh
 * with one host per model, and keep the timeline of states they passed through to say what flapped.
 */
import type { LoadedServer } from "../../harness/api.ts";
import type { MeshStatus } from "../../mesh/status.ts";
import { waitFor } from "../../harness/wait.ts";
import type { Lab, LabNode } from "../../harness/lab/lab.ts";

export interface LabState {
  /** Peers each node lists, by node name ("no answer in 5 s" when its API did not answer). */
  peers: Record<string, number | string>;
  /** Per model: the nodes whose namespace runs a llama-server for it. */
  servers: Record<string, string[]>;
  /** Per model: the nodes that say they serve it ready. */
  ready: Record<string, string[]>;
}

/** The ids of the peers a node lists, sorted; undefined when its API does not answer within 5 s. */
export async function peersOf(n: LabNode): Promise<string[] | undefined> {
  const status = await readApi<MeshStatus>(n, "/api/status");
  return typeof status === "string" ? undefined : status.peers.map((p) => p.nodeId).sort();
}

/** The llama-servers running in the lab for `model`, by process (not by what nodes say). */
export const llamaServers = (l: Lab, model: string) => l.processesLeft().filter((p) => p.cmd.includes("llama-server") && p.cmd.includes(`${model}.gguf`));

/** A node's API, read with a deadline: a node that does not answer is a finding, not a stuck test. */
export async function readApi<T>(n: LabNode, path: string): Promise<T | string> {
  const started = performance.now();
  try {
    const res = await fetch(`${n.url}${path}`, { signal: AbortSignal.timeout(5_000) });
    return (await res.json()) as T;
  } catch (err) {
    return `${path} failed after ${Math.round(performance.now() - started)} ms: ${(err as Error).message}`;
  }
}

export async function labState(l: Lab, nodes: readonly LabNode[], models: readonly string[]): Promise<LabState> {
  const name = (n: LabNode) => n.child.name;
  const says = await Promise.all(
    nodes.map(async (n) => {
      const [health, status] = await Promise.all([readApi<{ all_models_loaded: LoadedServer[] }>(n, "/api/v1/health"), readApi<MeshStatus>(n, "/api/status")]);
      return { n, list: typeof health === "string" ? [] : health.all_models_loaded, peers: typeof status === "string" ? status : typeof health === "string" ? health : status.peers.length };
    }),
  );
  const state: LabState = { peers: {}, servers: {}, ready: {} };
  for (const s of says) state.peers[name(s.n)] = s.peers;
  for (const m of models) {
    state.servers[m] = llamaServers(l, m).map((p) => nodes.find((n) => n.ns === p.ns)?.child.name ?? p.ns);
    state.ready[m] = says.filter((s) => s.list.some((x) => x.model_name === m && x.state === "ready")).map((s) => name(s.n));
  }
  return state;
}

/** One mesh (every node lists all others), each model in exactly one llama-server, on the one node that says it is ready. */
export function isSettled(s: LabState, nodeCount: number): boolean {
  if (Object.values(s.peers).some((p) => p !== nodeCount - 1)) return false;
  return Object.keys(s.servers).every((m) => s.servers[m]!.length === 1 && s.ready[m]!.length === 1 && s.ready[m]![0] === s.servers[m]![0]);
}

/**
 * Waits until the lab is settled and stays so for two heartbeats (a passing moment in the middle of
 * a handover does not count); resolves with when it first got there (performance.now()) and the
 * distinct states it passed through. On
 * timeout the error carries every distinct state seen, with its time.
 */
export async function oneMeshOneHost(l: Lab, nodes: readonly LabNode[], models: readonly string[], what: string, timeoutMs = 60_000): Promise<{ at: number; timeline: string[] }> {
  const start = performance.now();
  const timeline: string[] = [];
  let last = "";
  let since: number | undefined;
  try {
    await waitFor(
      async () => {
        const s = await labState(l, nodes, models);
        const key = JSON.stringify(s);
        if (key !== last) timeline.push(`${((performance.now() - start) / 1000).toFixed(1)} s ${key}`);
        last = key;
        if (!isSettled(s, nodes.length)) since = undefined;
        else since ??= performance.now();
        return since !== undefined && performance.now() - since >= 4_000;
      },
      { what: `one mesh of ${nodes.length} with one llama-server per model ${what}`, timeoutMs, intervalMs: 250 },
    );
  } catch (err) {
    throw new Error(`${(err as Error).message}; states seen:\n${timeline.slice(-40).join("\n")}`);
  }
  return { at: since!, timeline };
}
