/**
 * Per-model election (pure): within a model's group the node with the most memory hosts (ties:
 * the larger node id, so every node picks the same one) and runs llama-server; a model that fits
 * on its host alone runs there without RPC, otherwise the rest of the group are its RPC workers.
 */

export interface Candidate {
  nodeId: string;
  vramBytes: number;
}

export function elect(group: readonly Candidate[]): string | undefined {
  let best: Candidate | undefined;
  for (const n of group) {
    if (!best || n.vramBytes > best.vramBytes || (n.vramBytes === best.vramBytes && n.nodeId > best.nodeId)) best = n;
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
