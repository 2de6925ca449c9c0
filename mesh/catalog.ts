/**
 * The mesh's catalog of models, derived by every node from the same announcements (pure), with no
 * central authority: for each model its size and memory need, the nodes that have it on disk, the
 * nodes assigned to serve it (its group), the group's elected host, and its status.
 */
import { elect } from "./election.ts";

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
  status: ModelStatus;
}

/** Bytes a model needs to run: weights plus KV cache, with 10% headroom for compute buffers. */
export function modelNeedBytes(fileBytes: number, kvBytes: number, margin = 1.1): number {
  return Math.ceil((fileBytes + kvBytes) * margin);
}

/** KV cache bytes at f16 for a context: layers x context x (K + V widths) x 2 bytes. */
export function kvCacheBytes(layers: number, context: number, embd: number, heads: number, kvHeads: number): number {
  const kvWidth = (embd / heads) * kvHeads;
  return layers * context * kvWidth * 2 * 2;
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
      const capacityBytes = group.reduce((s, n) => s + n.vramBytes, 0);
      const host = elect(group);
      const hostNode = group.find((n) => n.nodeId === host);
      const status: ModelStatus =
        group.length === 0 ? "unloaded" : capacityBytes < m.needBytes ? "needs-capacity" : hostNode?.ready.includes(m.name) ? "ready" : "loading";
      return {
        name: m.name,
        source: m.source,
        sizeBytes: m.sizeBytes,
        needBytes: m.needBytes,
        nodesOnDisk: nodes.filter((n) => n.modelsOnDisk.some((d) => d.name === m.name)).map((n) => n.nodeId).sort(),
        nodesServing: group.map((n) => n.nodeId).sort(),
        capacityBytes,
        host,
        status,
      };
    })
    .sort((a, b) => a.name.localeCompare(b.name));
}
