/**
 * What this node announces about its models: the models on disk and the seeds (trimmed to what
 * peers accept, with the content identities it worked out), what its pool serves, its group's
 * state (`group-state.ts`), what it fetches, the RPC protocol its rpc-server speaks, and
 * its replicas. Its own node view in the mesh's view is read from here too, so the catalog sees
 * this node exactly as its peers do.
 */
import type { Log } from "../base/log.ts";
import type { ModelInfo, ModelStore } from "../models/model-store.ts";
import type { LoadedServers } from "../pool/loaded-servers.ts";
import type { ModelFetcher } from "./model-fetcher.ts";
import { AnnouncedDisk, type ModelFields } from "./model-fields.ts";
import { takesRequests } from "../pool/wrapped-server.ts";

/** The group's part of the announcement (`GroupReconciler.announced`). */
export type GroupFields = Pick<ModelFields, "assigned" | "hosting" | "idle" | "layout" | "loadFailed">;

export interface ModelAnnouncerOptions {
  store: Pick<ModelStore, "list">;
  /** Models named by a reference with `--model REF`, name → reference: announced, so any member can pull them. */
  refs: ReadonlyMap<string, string>;
  /** Models named with `--model`: kept above others when the announcement's budget cuts. */
  explicit: readonly string[];
  needOf: (m: ModelInfo) => number;
  /** This node's own models' content identities (a copy from us is checked against them). */
  identities?: { of(m: ModelInfo): string | undefined; readonly version: number };
  /** The pool's servers (what it serves). */
  servers: Pick<LoadedServers, "loaded">;
  fetcher: Pick<ModelFetcher, "progress" | "enabled">;
  /** The RPC protocol of our rpc-server (only nodes of one major version can be in a split). */
  rpcProtocol: () => string;
  /** The group's state (`group-state.ts`), which the group reconciler changes. */
  group: { announced(serving: readonly string[]): GroupFields };
  /** The replicas this node holds (`replica-keeper.ts`'s `ReplicaHolds`); none: it holds none and takes none. */
  replicas?: { announced(): Pick<ModelFields, "replicating" | "takesReplicas"> };
  log: Log;
}

export class ModelAnnouncer {
  private readonly disk: AnnouncedDisk;

  constructor(private readonly o: ModelAnnouncerOptions) {
    this.disk = new AnnouncedDisk(() => o, o.needOf, o.identities);
  }

  /** Moves whenever the disk fields do. */
  get version(): number {
    return this.disk.version;
  }

  /** What we announce about models. */
  announced(): ModelFields {
    // What takes requests: a draining server (an unload, a hand-over, a reload under way) finishes
    // what it has but is no server of the model to the mesh. Announced, a group elected it as the
    // one that answers, and a host loading its own handed over to it: both let the model go.
    const serving = this.o.servers.loaded().filter((s) => takesRequests(s.state)).map((s) => s.model);
    const group = this.o.group.announced(serving);
    const fetching = this.o.fetcher.progress;
    return {
      ...this.disk.fields([...this.o.explicit, ...(group.assigned ? [group.assigned] : []), ...serving]),
      serving,
      ...(group.assigned ? { assigned: group.assigned } : {}),
      hosting: group.hosting,
      idle: group.idle,
      fetches: this.o.fetcher.enabled,
      rpcProtocol: this.o.rpcProtocol(),
      keepsLayouts: true,
      hostsOnlyGetters: true,
      prefersSeeingHosts: true,
      ...(fetching ? { fetching } : {}),
      ...(group.layout ? { layout: group.layout } : {}),
      ...(group.loadFailed ? { loadFailed: group.loadFailed } : {}),
      ...(this.o.replicas?.announced() ?? { replicating: [], takesReplicas: false }),
    };
  }
}
