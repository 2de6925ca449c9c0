/**
 * The mesh's catalog of models, derived by every node from the same announcements (pure), with no
 * central authority: for each model its size and memory need, the nodes that have it on disk, the
 * nodes assigned to serve it (its group), the group's elected host, and its status.
 */
import { elect, type Candidate } from "./election.ts";

export interface NodeModel {
  name: string;
  sizeBytes: number;
  /** File size plus KV cache for its context, with a margin (see `modelNeedBytes`). */
  needBytes: number;
  /** Where to download it when nobody has it (e.g. a Hugging Face resolve URL). */
  source?: string;
}

/** What the catalog needs to know about one node (ours included), from its announcement. */
export interface NodeView {
  nodeId: string;
  /** Memory it offers for models: VRAM, or RAM on a CPU node. */
  vramBytes: number;
  modelsOnDisk: NodeModel[];
  /** The model this node serves (its group), if assigned. */
  assigned: string | undefined;
  /** Models this node's API answers for right now (its llama-server is up). */
  ready: string[];
  /** Models it unloaded for lack of requests: nobody is assigned them again until one comes. */
  idle: string[];
  /** It hosts its assigned model (has decided to run llama-server for it). */
  hosting?: boolean;
  /** It downloads models it is assigned (false: it lends compute only). Default true. */
  fetches?: boolean;
}

export type ModelStatus = "unloaded" | "loading" | "ready" | "needs-capacity";

export interface CatalogModel {
  name: string;
  source: string | undefined;
  sizeBytes: number;
  needBytes: number;
  nodesOnDisk: string[];
  /** The group: nodes assigned to this model. */
  nodesServing: string[];
  /** Sum of the group's memory. */
  capacityBytes: number;
  host: string | undefined;
  /** The host cannot hold it alone: it runs split over the group, so another node adds capacity. */
  split: boolean;
  /** Let go for lack of requests and served by nobody: not to be assigned until one comes (its group disbands). */
  idle: boolean;
  status: ModelStatus;
}

/** A model's group as election sees it. */
export function electionCandidates(nodes: readonly NodeView[], model: string): Candidate[] {
  return nodes
    .filter((n) => n.assigned === model)
    .map((n) => ({
      nodeId: n.nodeId,
      vramBytes: n.vramBytes,
      ready: n.ready.includes(model),
      hosting: n.hosting === true,
      canHost: n.fetches !== false || n.modelsOnDisk.some((d) => d.name === model),
    }));
}

/**
 * The catalog from every node's view, plus the models the mesh was seeded with (`--model` on some
 * node, possibly not on anyone's disk yet). Sorted by name, so every node lists it alike.
 */
export function catalog(nodes: readonly NodeView[], seeded: readonly NodeModel[] = []): CatalogModel[] {
  const models = new Map<string, NodeModel>();
  for (const m of seeded) models.set(m.name, m);
  for (const n of nodes) {
    for (const m of n.modelsOnDisk) {
      // The first node that has the file says its size; a seed's source URL is kept.
      const known = models.get(m.name);
      if (!known?.sizeBytes) models.set(m.name, { ...known, ...m });
    }
  }
  for (const n of nodes) if (n.assigned && !models.has(n.assigned)) models.set(n.assigned, { name: n.assigned, sizeBytes: 0, needBytes: 0 });

  return [...models.values()]
    .map((m): CatalogModel => {
      const group = nodes.filter((n) => n.assigned === m.name);
      const candidates = electionCandidates(nodes, m.name);
      const capacityBytes = group.reduce((s, n) => s + n.vramBytes, 0);
      const readyOn = nodes.filter((n) => n.ready.includes(m.name)).map((n) => n.nodeId).sort();
      // A model nobody is assigned can still be up on a node that loaded it on demand.
      const host = elect(candidates) ?? readyOn[0];
      const hostNode = group.find((n) => n.nodeId === host);
      const status: ModelStatus =
        group.length === 0
          ? readyOn.length ? "ready" : "unloaded"
          : capacityBytes < m.needBytes ? "needs-capacity" : host && readyOn.includes(host) ? "ready" : "loading";
      return {
        name: m.name,
        source: m.source,
        sizeBytes: m.sizeBytes,
        needBytes: m.needBytes,
        nodesOnDisk: nodes.filter((n) => n.modelsOnDisk.some((d) => d.name === m.name)).map((n) => n.nodeId).sort(),
        nodesServing: group.map((n) => n.nodeId).sort(),
        capacityBytes,
        host,
        split: hostNode !== undefined && hostNode.vramBytes < m.needBytes,
        idle: readyOn.length === 0 && nodes.some((n) => n.idle.includes(m.name)),
        status,
      };
    })
    .sort((a, b) => a.name.localeCompare(b.name));
}
