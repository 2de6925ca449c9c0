/**
 * This node's group as it stands: the model it is assigned, whether it hosts it, the models it let
 * go idle, the split each loaded server runs over, and its load schedule. Made before the parts
 * that read it (the announcer, which tells peers the group's part, made before the mesh's view; the
 * split planner and the pool, which ask it before a load) and the one that changes it (the
 * reconciler, which reads that view), so each is built with it.
 */
import { workerIds } from "../placement/election.ts";
import { HostSchedule } from "./host-schedule.ts";
import type { GroupFields } from "./model-announcer.ts";

export class GroupState {
  /** The model this node is assigned (none: it is in no group). */
  assigned: string | undefined;
  /** It hosts the assigned model: it decided to run it, through loads and reloads. */
  hosting = false;
  /** Models it let go for lack of requests, until one is served again anywhere. */
  readonly idle = new Set<string>();
  /** The workers each of its loaded servers runs over (one loaded on demand too, should it become its assigned model). */
  readonly loadedSplits = new Map<string, string>();
  readonly schedule = new HostSchedule();

  /** `peerServes`: whether a peer whose word counts announces it serves a model. */
  constructor(private readonly peerServes: (model: string) => boolean) {}

  /** The split the assigned model's server runs over, when it is loaded. */
  get loadedSplit(): string | undefined {
    return this.assigned === undefined ? undefined : this.loadedSplits.get(this.assigned);
  }

  /**
   * Whether `model`'s server is this node's for the mesh: it hosts it for its group while it has
   * peers (alone, a node swaps like a single box). The pool's question before an on-demand load
   * evicts it (`--evict-mesh-models on` lets it).
   */
  hostsForMesh(model: string, peerCount: number): boolean {
    return this.hosting && model === this.assigned && peerCount > 0;
  }

  /** The group's part of our announcement, given the models our pool serves. */
  announced(serving: readonly string[]): GroupFields {
    // A model served again anywhere (a request loaded it on demand) is no longer idle.
    for (const m of this.idle) if (serving.includes(m) || this.peerServes(m)) this.idle.delete(m);
    // The workers our running server uses: peers keep that layout in their plans.
    const running = this.hosting && this.assigned !== undefined && serving.includes(this.assigned);
    const layout = running && this.loadedSplit !== undefined ? workerIds(this.loadedSplit) : undefined;
    const loadFailed = this.schedule.announced(this.assigned, serving);
    return {
      ...(this.assigned ? { assigned: this.assigned } : {}),
      hosting: this.hosting,
      idle: [...this.idle],
      ...(layout ? { layout } : {}),
      ...(loadFailed ? { loadFailed } : {}),
    };
  }
}
