/**
 * What this node's parts report, and which part hears it: the pool (a change, a split to plan, an
 * eviction, whether a server is held for the mesh, a model's identity for its saved slots), the
 * fetcher and the models dir (files came or went, a model deleted) and the replicas (theirs
 * changed). It is made before those parts, so their callbacks point here, and connected to the
 * parts that answer once they exist (`connect`): each report has one method, and each method names
 * the part it goes to.
 */
import type { ModelIdentities } from "../models/model-identities.ts";
import type { ModelInfo } from "../models/model-store.ts";
import type { SlotCache } from "../pool/slot-cache.ts";
import type { EvictionCause, RpcSplit } from "../pool/pool-types.ts";
import type { GroupReconciler } from "./group-reconciler.ts";
import type { ReplicaKeeper } from "./replica-keeper.ts";

export interface NodeListeners {
  /** Tells the peers what changed (the `Signal` the membership sends our announcement on, if it changed). */
  announce: () => void;
  group: Pick<GroupReconciler, "reconcile" | "rpcSplit" | "onEvict" | "heldForMesh" | "lendsToSplit">;
  replicas: Pick<ReplicaKeeper, "onEvict">;
  /** This node's models' content identities, which key their saved slots. */
  identities: Pick<ModelIdentities, "of" | "forget">;
  slots: Pick<SlotCache, "drop">;
}

export class NodeEvents {
  private listeners: NodeListeners | undefined;

  connect(listeners: NodeListeners): void {
    this.listeners = listeners;
  }

  private get to(): NodeListeners {
    if (!this.listeners) throw new Error("a node part reported before the node's parts were connected");
    return this.listeners;
  }

  /** Something this node announces or decides on changed (the pool, its files, its replicas): announce, and decide again. */
  changed(): void {
    this.to.announce();
    this.to.group.reconcile();
  }

  /** The pool's hook for the rpc-servers a load uses. */
  rpcSplit(model: ModelInfo): Promise<RpcSplit> {
    return this.to.group.rpcSplit(model);
  }

  /** The pool unloads `model`: a replica's unload is the keeper's alone, the group's rules never hear of it. */
  evicted(model: string, cause: EvictionCause): void {
    if (!this.to.replicas.onEvict(model, cause)) this.to.group.onEvict(model, cause);
  }

  heldForMesh(model: string): boolean {
    return this.to.group.heldForMesh(model);
  }

  lendsToSplit(): boolean {
    return this.to.group.lendsToSplit();
  }

  /** A model's files were deleted: its saved slots go with them. */
  removed(name: string): void {
    const identity = this.to.identities.forget(name);
    if (identity !== undefined) this.to.slots.drop(identity);
  }

  /** The slot cache's question when a model loads: its content identity, once worked out. */
  identityOf(model: ModelInfo): string | undefined {
    return this.to.identities.of(model);
  }
}
