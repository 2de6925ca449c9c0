/**
 * Per-model election (pure): within a model's group the node with the most memory hosts and runs
 * llama-server; a model that fits on its host alone runs there without RPC, otherwise the rest of
 * the group are its RPC workers. Ties go to the node whose server for it already answers, then to
 * one that has decided to host it (it may be reloading), so an equal newcomer causes no churn; then
 * to the larger node id, so every node picks the same one. A node still without the file hosts
 * only when nobody with it can (it fetches first); one that can never get it (no file, and it does
 * not fetch models) never hosts: it lends its memory to a host that can, and until one joins the
 * model has none (a host that cannot load it would hold its clients off with "being fetched").
 */

export interface Candidate {
  nodeId: string;
  vramBytes: number;
  /** Its llama-server for the model answers now. */
  ready?: boolean;
  /** It has decided to host the model (loaded, loading or reloading). */
  hosting?: boolean;
  /** It has the model's files now. */
  canHost?: boolean;
  /** False: it has no files and fetches none, so it never hosts. */
  canGet?: boolean;
  /** False for a node of an older version, which may elect one that cannot get the model: then the whole group may. */
  hostsOnlyGetters?: boolean;
  /** For a model some copy of which reads images: whether its own copy does (its projector is beside it). Undefined otherwise. */
  seesImages?: boolean;
  /** False for a node of an older version, which does not elect a copy that reads images first: then the whole group does not. */
  prefersSeeingHosts?: boolean;
  /** The workers its running server for the model uses (it announced them), when it runs one. */
  layout?: readonly string[];
  /** False for a node of an older version, which elects afresh: then the whole group does. */
  keepsLayouts?: boolean;
}

export function elect(group: readonly Candidate[]): string | undefined {
  // A copy with its projector first: one without would refuse every image (a projector-less copy
  // still hosts when the group has no other, rather than nobody serving the model at all).
  const seeing = group.every((n) => n.prefersSeeingHosts !== false);
  const rank = (n: Candidate) => [Number(n.canHost !== false), seeing ? Number(n.seesImages !== false) : 0, n.vramBytes, Number(n.ready === true), Number(n.hosting === true)];
  let best: Candidate | undefined;
  // Every node of the group must pick the same host: the rule holds only where every one knows it.
  const onlyGetters = group.every((n) => n.hostsOnlyGetters !== false);
  for (const n of group) {
    if (onlyGetters && n.canGet === false) continue;
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

/**
 * The layout a model runs in: its host and the workers whose rpc-servers it uses. A layout that
 * runs is kept while it can be (every reload of a large model is minutes of downtime): a member
 * joining or leaving changes it only when the running one lost a worker, no longer has the memory,
 * when one member can hold the model alone, which saves every RPC hop per token, or when its host's
 * copy cannot read images (no projector) and another member's can. Otherwise the
 * elected host runs it alone if it can, else over every other member of the group. In a group with
 * a node of an older version, which knows no kept layouts, every node elects afresh as it does.
 */
export function splitPlan(group: readonly Candidate[], needBytes: number): SplitPlan | undefined {
  const kept = group.every((n) => n.keepsLayouts !== false) ? runningLayout(group, needBytes) : undefined;
  if (kept) return kept;
  const host = elect(group);
  if (!host) return undefined;
  const hostNode = group.find((n) => n.nodeId === host)!;
  if (hostNode.vramBytes >= needBytes) return { host, workers: [] };
  return { host, workers: group.filter((n) => n.nodeId !== host).map((n) => n.nodeId).sort() };
}

/** The layout running now, when it may stay (see `splitPlan`). */
function runningLayout(group: readonly Candidate[], needBytes: number): SplitPlan | undefined {
  const running = group.filter((n) => n.ready === true && n.hosting === true && n.canHost !== false);
  const host = elect(running);
  const hostNode = running.find((n) => n.nodeId === host);
  if (!host || !hostNode) return undefined;
  const workers = [...(hostNode.layout ?? [])].sort();
  const members = new Map(group.map((n) => [n.nodeId, n]));
  if (!workers.every((id) => id !== host && members.has(id))) return undefined;
  const capacity = hostNode.vramBytes + workers.reduce((sum, id) => sum + members.get(id)!.vramBytes, 0);
  if (capacity < needBytes) return undefined;
  const soloElsewhere = workers.length > 0 && group.some((n) => n.canHost !== false && n.vramBytes >= needBytes);
  if (soloElsewhere) return undefined;
  // Nor a host whose copy cannot read images while another's can: it would refuse every image.
  const seeingElsewhere = hostNode.seesImages === false && group.every((n) => n.prefersSeeingHosts !== false) && group.some((n) => n.canHost !== false && n.seesImages === true);
  if (seeingElsewhere) return undefined;
  return { host, workers };
}

/**
 * The workers a load on `self` runs over: its plan's when it is the plan's host, none otherwise;
 * or, when those together offer less than the model needs, what they offer. Whatever asked for the
 * load (the group, a request, `/api/v1/load`), no node runs a model beyond the memory it offers,
 * alone or with its workers.
 */
export function loadLayout(
  self: { nodeId: string; vramBytes: number },
  plan: SplitPlan | undefined,
  vramOf: (id: string) => number,
  needBytes: number,
): { workers: string[] } | { offered: number; workers: string[] } {
  const workers = plan?.host === self.nodeId ? plan.workers : [];
  const offered = self.vramBytes + workers.reduce((sum, id) => sum + vramOf(id), 0);
  return offered >= needBytes ? { workers: [...workers] } : { offered, workers: [...workers] };
}

/** The node ids of a layout kept as text (comma-joined, as a loaded server records its workers). */
export const workerIds = (workers: string | undefined): string[] => (workers ?? "").split(",").filter((id) => id !== "");

/**
 * Whether a server of ours, loaded over `ourWorkers` (comma-joined node ids), holds an rpc-server
 * that the split `plan` of another host needs: this node is one of its workers (a CPU node's own
 * server runs on its own rpc-server), or one of our workers is its host or one of its workers.
 */
export function holdsWhatTheyNeed(self: string, ourWorkers: string | undefined, plan: { host: string; workers: readonly string[] }): boolean {
  const needed = new Set([plan.host, ...plan.workers]);
  return plan.workers.includes(self) || workerIds(ourWorkers).some((id) => needed.has(id));
}
