/**
 * Per-model election (pure): within a model's group the node with the most memory hosts and runs
 * llama-server; a model that fits on its host alone runs there without RPC, otherwise the rest of
 * the group are its RPC workers. Ties go to the node whose server for it already answers, then to
 * one that has decided to host it (it may be reloading), so an equal newcomer causes no churn; then
 * to the larger node id, so every node picks the same one. A node that
 * cannot get the file (it does not fetch models) hosts only when nobody else can.
 */

export interface Candidate {
  nodeId: string;
  vramBytes: number;
  /** Its llama-server for the model answers now. */
  ready?: boolean;
  /** It has decided to host the model (loaded, loading or reloading). */
  hosting?: boolean;
  /** It has the model's files or may fetch them. */
  canHost?: boolean;
}

export function elect(group: readonly Candidate[]): string | undefined {
  const rank = (n: Candidate) => [Number(n.canHost !== false), n.vramBytes, Number(n.ready === true), Number(n.hosting === true)];
  let best: Candidate | undefined;
  for (const n of group) {
    if (!best) {
      best = n;
      continue;
    }
    const [a, b] = [rank(n), rank(best)];
    const i = a.findIndex((v, k) => v !== b[k]);
    if (i >= 0 ? a[i]! > b[i]! : n.nodeId > best.nodeId) best = n;
  }
  return best?.nodeId;
}

export interface SplitPlan {
  host: string;
  /** Nodes whose rpc-servers the host uses, in node-id order; empty when the host suffices. */
  workers: string[];
}

export function splitPlan(group: readonly Candidate[], needBytes: number): SplitPlan | undefined {
  const host = elect(group);
  if (!host) return undefined;
  const hostNode = group.find((n) => n.nodeId === host)!;
  if (hostNode.vramBytes >= needBytes) return { host, workers: [] };
  return { host, workers: group.filter((n) => n.nodeId !== host).map((n) => n.nodeId).sort() };
}

/**
 * Whether a server of ours, loaded over `ourWorkers` (comma-joined node ids), holds an rpc-server
 * that the split `plan` of another host needs: this node is one of its workers (a CPU node's own
 * server runs on its own rpc-server), or one of our workers is its host or one of its workers.
 */
export function holdsWhatTheyNeed(self: string, ourWorkers: string | undefined, plan: { host: string; workers: readonly string[] }): boolean {
  const needed = new Set([plan.host, ...plan.workers]);
  return plan.workers.includes(self) || (ourWorkers ?? "").split(",").some((id) => id !== "" && needed.has(id));
}
