/**
 * Splits for the pool, the shell around the pure election rules (`placement/election.ts`): the
 * split of a group as every member of it works it out, the rpc-servers a load of this node's
 * model runs over (with layers in proportion to memory), and whether this node lends its
 * rpc-server to another node's split. It reads the mesh's view and the group's state (which model
 * this node is assigned, whether it hosts it), which the reconciler changes and the planner
 * records each load's workers in.
 */
import { splitCandidates, type NodeView } from "../placement/catalog.ts";
import { loadLayout, splitPlan, type SplitPlan } from "../placement/election.ts";
import { gib } from "../placement/route.ts";
import type { ModelInfo } from "../models/model-store.ts";
import { needsCapacity } from "../pool/errors.ts";
import type { RpcSplit } from "../pool/pool-types.ts";
import type { MeshView } from "./mesh-view.ts";
import type { GroupState } from "./group-state.ts";

export interface SplitPlannerOptions {
  view: Pick<MeshView, "views" | "catalog">;
  group: Pick<GroupState, "assigned" | "hosting" | "loadedSplits">;
  /** Memory this node offers the mesh. */
  vramBytes: number;
  needOf: (m: ModelInfo) => number;
  /** The host's own compute is its rpc-server (no GPU): it joins the split as the last device. */
  ownRpcEndpoint: () => string | undefined;
  /** Where this node reaches a peer's rpc-server (its tunnel). */
  tunnelEndpoint: (peerId: string) => Promise<string>;
}

export class SplitPlanner {
  constructor(private readonly o: SplitPlannerOptions) {}

  /** The split of `model`'s group, as every member of it works it out. */
  plan(views: readonly NodeView[], model: string, needBytes: number): SplitPlan | undefined {
    return splitPlan(splitCandidates(views, model), needBytes);
  }

  /**
   * The pool's hook: the rpc-servers a load of `model` uses, with layers in proportion to memory.
   * Only this node's assigned model runs over its group; the workers (comma-joined) are the group's
   * record of that server's split before they are reached, and a load the group cannot hold is
   * refused (`needsCapacity`).
   */
  async rpcSplit(model: ModelInfo): Promise<RpcSplit> {
    const need = this.o.needOf(model);
    const views = this.o.view.views();
    const plan = model.name === this.o.group.assigned ? this.plan(views, model.name, need) : undefined;
    const vram = (id: string) => views.find((v) => v.nodeId === id)?.vramBytes ?? 0;
    const layout = loadLayout({ nodeId: views[0]!.nodeId, vramBytes: this.o.vramBytes }, plan, vram, need);
    const workers = layout.workers;
    if ("offered" in layout) {
      const over = workers.length ? `this node and its ${workers.length} worker(s) offer` : "this node offers";
      throw needsCapacity(`model "${model.name}" needs ${gib(need)} and ${over} ${gib(layout.offered)}; it runs once nodes with enough memory between them are assigned it`);
    }
    this.o.group.loadedSplits.set(model.name, workers.join(","));
    if (workers.length === 0) return { endpoints: [] };
    const endpoints = await Promise.all(workers.map((id) => this.o.tunnelEndpoint(id)));
    const own = this.o.ownRpcEndpoint();
    // With a GPU the host's own device comes on top of these and its share is llama.cpp's to decide.
    if (!own) return { endpoints };
    const shares = [...workers.map(vram), this.o.vramBytes];
    return { endpoints: [...endpoints, own], ...(shares.every((s) => s > 0) ? { tensorSplit: shares.map((s) => Math.max(1, Math.round(s / 2 ** 20))) } : {}) };
  }

  /** This node is a worker of its assigned model's split: its rpc-server computes for another node's llama-server. */
  lendsToSplit(): boolean {
    const { assigned, hosting } = this.o.group;
    if (assigned === undefined || hosting) return false;
    return this.o.view.catalog().find((m) => m.name === assigned)?.split === true;
  }
}
