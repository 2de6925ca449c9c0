/**
 * This node's part in the multi-model mesh, the shell around the pure catalog, allocation,
 * election and routing rules: what it announces about its models, which model's group it is in,
 * whether it hosts that model (and over which peers' rpc-servers), where each request goes, and
 * when it lets a model go for lack of requests. It re-decides on every change it hears of, and
 * works the catalog out again only then: requests read the one worked out last.
 */
import { allocate, type Assignment } from "../placement/allocation.ts";
import { catalog, splitCandidates, type CatalogModel, type NodeView } from "../placement/catalog.ts";
import { holdsWhatTheyNeed, loadLayout, splitPlan, workerIds, type SplitPlan } from "../placement/election.ts";
import { HEARTBEAT_MS, type MeshNode } from "./mesh-node.ts";
import { gib, hostAllowed, routeModel, withinHosts, type Chooser, type Route } from "../placement/route.ts";
import type { Log } from "../log.ts";
import { needOf } from "../models/model-need.ts";
import type { ModelInfo, ModelStore } from "../models/model-store.ts";
import type { EvictionCause, RpcSplit } from "../pool/pool-types.ts";
import { needsCapacity } from "../pool/errors.ts";
import type { Pool } from "../pool/pool.ts";
import type { FetchProgress, ModelFetcher } from "./model-fetcher.ts";
import { ModelIdentities } from "../models/model-identities.ts";
import { HostSchedule } from "./host-schedule.ts";
import { AnnouncedDisk, hasFiles, nodeView, type ModelFields } from "./model-fields.ts";

/** One and a half heartbeats without a word: the peer is probably gone (it is dropped at three). */
const SILENT_MS = HEARTBEAT_MS * 1.5;

export interface MeshModelsOptions {
  store: ModelStore;
  pool: Pool;
  mesh: () => MeshNode | undefined;
  /** Models named with `--model`: this node chooses among these only. */
  explicit: string[];
  /** Models named by a reference with `--model REF`, name → reference: announced, so any member can pull them. */
  refs: ReadonlyMap<string, string>;
  vramBytes: number;
  /** The host's own compute is its rpc-server (no GPU): it joins the split as the last device. */
  ownRpcEndpoint: () => string | undefined;
  tunnelEndpoint: (peerId: string) => Promise<string>;
  /** The RPC protocol of our rpc-server (only nodes of one major version can be in a split). */
  rpcProtocol: () => string;
  defaultCtxSize: number;
  /** Loads on demand may unload the model this node hosts for the mesh (`--evict-mesh-models on`). */
  evictMeshModels: boolean;
  fetcher: ModelFetcher;
  /** `--hosts`: the nodes that may serve this node's clients and take over a model it runs (none: any member). */
  hosts: readonly string[];
  /** This node's replicas (`node/replica-keeper.ts`): announced as such, and never unloaded as a hand-over of its group's model. */
  replicas?: () => Pick<ModelFields, "replicating" | "takesReplicas">;
  log: Log;
}

export class MeshModels {
  private assigned: string | undefined;
  /** We host the assigned model: we decided to run it, through loads and reloads. */
  private hosting = false;
  private readonly idle = new Set<string>();
  /** The workers each of our loaded servers runs over (one loaded on demand too, should it become our assigned model). */
  private readonly loadedSplits = new Map<string, string>();
  private settleTimer: Timer | undefined;
  private readonly schedule = new HostSchedule();
  private stopped = false;
  private pending = false;
  /** Models whose server we unload because another node hosts them now (not on anyone's request). */
  private readonly handingOver = new Set<string>();
  /** Models whose files we failed to get for good: not chosen again by this node. */
  private readonly unfetchable = new Set<string>();
  /** An explicit --model the mesh does not know yet, said once. */
  private toldUnknown = false;
  private readonly disk: AnnouncedDisk;
  /** Bumped by every change this node hears of (see `reconcile`). */
  private changes = 0;
  private worked: { key: string; views: NodeView[]; catalog: CatalogModel[] } | undefined;

  constructor(private readonly o: MeshModelsOptions) {
    // Our models' content identities are announced once worked out (a copy from us is checked against them).
    this.disk = new AnnouncedDisk(() => this.o, (m) => this.needOf(m), new ModelIdentities(o.fetcher.hasher, () => o.mesh()?.announceIfChanged()));
  }

  private get loadedSplit(): string | undefined {
    return this.assigned === undefined ? undefined : this.loadedSplits.get(this.assigned);
  }

  /** What we announce about models. */
  announced(): ModelFields {
    const serving = this.o.pool.loaded().filter((s) => s.state === "ready").map((s) => s.model);
    // A model served again anywhere (a request loaded it on demand) is no longer idle.
    const peers = [...(this.o.mesh()?.membership.peers.values() ?? [])];
    for (const m of this.idle) if (serving.includes(m) || peers.some((p) => p.announcement.serving.includes(m))) this.idle.delete(m);
    const fetching = this.o.fetcher.progress;
    // The workers our running server uses: peers keep that layout in their plans.
    const running = this.hosting && this.assigned !== undefined && serving.includes(this.assigned);
    const layout = running && this.loadedSplit !== undefined ? workerIds(this.loadedSplit) : undefined;
    const loadFailed = this.schedule.announced(this.assigned, serving);
    return {
      ...this.disk.fields([...this.o.explicit, ...(this.assigned ? [this.assigned] : []), ...serving]),
      serving,
      ...(this.assigned ? { assigned: this.assigned } : {}),
      hosting: this.hosting,
      idle: [...this.idle],
      fetches: this.o.fetcher.enabled,
      rpcProtocol: this.o.rpcProtocol(),
      keepsLayouts: true,
      hostsOnlyGetters: true,
      ...(fetching ? { fetching } : {}),
      ...(layout ? { layout } : {}),
      ...(loadFailed ? { loadFailed } : {}),
      ...(this.o.replicas?.() ?? { replicating: [], takesReplicas: false }),
    };
  }

  /** Whether `model`'s server is held for the mesh: on-demand loads may not take its place (alone, a node swaps like a single box). */
  heldForMesh(model: string): boolean {
    return !this.o.evictMeshModels && this.hosting && model === this.assigned && (this.o.mesh()?.membership.peers.size ?? 0) > 0;
  }

  private needOf(m: ModelInfo): number {
    return needOf(m.sizeBytes, m.facts, m.ctxSize ?? this.o.defaultCtxSize);
  }

  /** Every node's view, ours first. */
  views(): NodeView[] {
    return this.current().views;
  }

  /**
   * Views and catalog as of the last change this node heard of (`reconcile`: membership reports a
   * peer's announcement only when its content changed) or its own state moved, never per request.
   */
  private current(): { views: NodeView[]; catalog: CatalogModel[] } {
    const mesh = this.o.mesh();
    const own = this.announced();
    const peers = [...(mesh?.membership.peers.values() ?? [])];
    const key = JSON.stringify([
      this.changes,
      this.disk.version,
      mesh?.nodeId,
      own.serving,
      own.assigned,
      own.hosting,
      own.idle,
      own.fetches,
      own.fetching?.model,
      own.rpcProtocol,
      own.layout,
      own.replicating,
      own.loadFailed,
      // Not their seq: a peer may bump it without a change, as often as it likes.
      peers.map((p) => p.id),
    ]);
    if (this.worked?.key !== key) {
      const views = this.viewsOf(own);
      this.worked = { key, views, catalog: catalog(views) };
    }
    return this.worked;
  }

  private viewsOf(own: ModelFields): NodeView[] {
    const mesh = this.o.mesh();
    return [
      nodeView(mesh?.nodeId ?? "", this.o.vramBytes, own),
      ...[...(mesh?.membership.peers.values() ?? [])].map((p) => nodeView(p.id, p.announcement.vramBytes, p.announcement)),
    ];
  }

  /** The mesh's catalog; from `views` when given (a what-if), else the one worked out last. */
  catalog(views?: NodeView[]): CatalogModel[] {
    return views ? catalog(views) : this.current().catalog;
  }

  async route(model: string, forwarded: boolean, choose?: Chooser): Promise<Route> {
    // A model a peer serves is not looked for on disk again (a rescan per request); an unknown one is.
    const entry = this.catalog().find((m) => m.name === model);
    const info = this.o.store.list().find((m) => m.name === model) ?? (entry ? undefined : await this.o.store.find(model));
    const known = info !== undefined;
    const server = this.o.pool.server(model);
    const ready = server?.state === "ready" && !server.draining;
    const needBytes = info ? this.needOf(info) : (entry?.needBytes ?? 0);
    const self = {
      nodeId: this.o.mesh()?.nodeId ?? "",
      model,
      known,
      // A stat of every file: only asked when the route depends on it (never for a model served here now).
      get hasFiles() {
        return info !== undefined && hasFiles(info);
      },
      ready,
      needBytes,
      vramBytes: this.o.vramBytes,
    };
    const silentMs = (id: string) => Date.now() - (this.o.mesh()?.membership.peers.get(id)?.lastSeen ?? Date.now());
    const allowed = (id: string) => hostAllowed(this.o.hosts, self.nodeId, id);
    // A server that missed its heartbeats is likely gone: another one of the model takes the request.
    const chosen = routeModel(entry, self, forwarded, choose && ((servers) => choose(servers.filter((id) => silentMs(id) <= SILENT_MS && allowed(id)))));
    const route = forwarded ? chosen : withinHosts(chosen, entry, self, allowed);
    // With none other, a clear 503 now beats a request that waits for the connection to time out.
    if (route.to === "peer") {
      if (silentMs(route.peerId) > SILENT_MS) {
        const message = `the node hosting model "${model}" (${route.peerId.slice(0, 10)}) has not been heard from for ${Math.round(silentMs(route.peerId) / 1000)} s; retry shortly`;
        return { to: "unavailable", message, retryAfterS: 5 };
      }
    }
    return route;
  }

  /** The split of our assigned model's group, as every member of it works it out. */
  private plan(views: NodeView[], model: string, needBytes: number): SplitPlan | undefined {
    return splitPlan(splitCandidates(views, model), needBytes);
  }

  /** The pool's hook: the rpc-servers a load of `model` uses, with layers in proportion to memory. */
  async rpcSplit(model: ModelInfo): Promise<RpcSplit> {
    const need = this.needOf(model);
    const views = this.views();
    const plan = model.name === this.assigned ? this.plan(views, model.name, need) : undefined;
    const vram = (id: string) => views.find((v) => v.nodeId === id)?.vramBytes ?? 0;
    const layout = loadLayout({ nodeId: views[0]!.nodeId, vramBytes: this.o.vramBytes }, plan, vram, need);
    const workers = layout.workers;
    if ("offered" in layout) {
      const over = workers.length ? `this node and its ${workers.length} worker(s) offer` : "this node offers";
      throw needsCapacity(`model "${model.name}" needs ${gib(need)} and ${over} ${gib(layout.offered)}; it runs once nodes with enough memory between them are assigned it`);
    }
    this.loadedSplits.set(model.name, workers.join(","));
    if (workers.length === 0) return { endpoints: [] };
    const endpoints = await Promise.all(workers.map((id) => this.o.tunnelEndpoint(id)));
    const own = this.o.ownRpcEndpoint();
    // With a GPU the host's own device comes on top of these and its share is llama.cpp's to decide.
    if (!own) return { endpoints };
    const shares = [...workers.map(vram), this.o.vramBytes];
    return { endpoints: [...endpoints, own], ...(shares.every((s) => s > 0) ? { tensorSplit: shares.map((s) => Math.max(1, Math.round(s / 2 ** 20))) } : {}) };
  }

  /**
   * The pool is unloading a model. One we host that went idle, made room for one asked for on demand
   * (`--evict-mesh-models on`) or was unloaded on request (the API, a console, Ollama's keep_alive 0)
   * frees our group: the mesh shows it unloaded and a request loads it again; a hand-over or reload does not.
   */
  onEvict(model: string, cause: EvictionCause): void {
    const handover = this.handingOver.delete(model);
    // A reload asked for its split before this eviction: that one stays.
    if (cause !== "reload") this.loadedSplits.delete(model);
    if (model !== this.assigned || cause === "reload" || (cause === "unload" && handover)) return;
    const why = cause === "idle" ? "the model had no requests for the idle time" : cause === "unload" ? "the model was unloaded on request" : "the model made room for one asked for on demand";
    this.o.log.info(`${why}; leaving its group`, { model, cause });
    this.idle.add(model);
    this.setAssigned(undefined);
  }

  /** The files of our model cannot be had (a hash that never matches, a refusal): choose another. */
  private giveUp(model: string, why: string): void {
    if (this.assigned !== model) return;
    this.o.log.error("giving up on the assigned model; choosing another", { model, why });
    this.unfetchable.add(model);
    this.setAssigned(undefined);
  }

  private setAssigned(model: string | undefined): void {
    this.assigned = model;
    this.hosting = false;
    this.schedule.reset();
    if (model === undefined) this.o.fetcher.cancel();
    this.o.mesh()?.announceIfChanged();
    this.reconcileSoon();
  }

  /** Decides again on the next turn (not from inside a decision, so changes settle one at a time). */
  private reconcileSoon(): void {
    if (this.pending) return;
    this.pending = true;
    setImmediate(() => void ((this.pending = false), this.reconcile()));
  }

  /**
   * Decides again: leave a group that went idle, take a model when we have none, host it if
   * elected. Every change this node hears of (peers, pool, files) comes through here, so the
   * catalog is worked out again here too.
   */
  reconcile(): void {
    this.changes++;
    const mesh = this.o.mesh();
    if (!mesh || this.stopped) return;
    // A fetch waiting for a member to pull its model looks again.
    this.o.fetcher.changed();
    const { views, catalog: models } = this.current();

    const mine = this.assigned;
    if (mine && models.find((m) => m.name === mine)?.idle) {
      this.o.log.info("the group's host let the model go for lack of requests; leaving the group", { model: mine });
      return this.setAssigned(undefined);
    }
    // A node alone and given no model serves what it has on demand, like a single box.
    if (!mine && (this.o.explicit.length > 0 || mesh.membership.peers.size > 0)) return this.choose(views, models);
    // A spare (in a group that does not use it) moves to a model that cannot run without it or
    // that nobody serves; it serves no request, so nothing is taken from anyone.
    if (mine && this.isSpare(views, models)) {
      const asIfFree = views.map((v, i) => (i === 0 ? { ...v, assigned: undefined, hosting: false } : v));
      const better = allocate(asIfFree[0]!, this.catalog(asIfFree), this.candidatesFilter());
      if (better && better.model !== mine && better.rule <= 2) {
        this.o.log.info("a spare in its group; moving to a model that needs it", { from: mine, model: better.model, rule: better.rule });
        return this.take(better);
      }
    }
    if (mine) this.host(views, models.find((m) => m.name === mine));
  }

  /** This node is a worker of its assigned model's split: its rpc-server computes for another node's llama-server. */
  lendsToSplit(): boolean {
    if (this.assigned === undefined || this.hosting) return false;
    return this.catalog().find((m) => m.name === this.assigned)?.split === true;
  }

  /** Models this node may choose from: the --model ones if given, never one it failed to fetch. */
  private candidatesFilter(): string[] | undefined {
    if (this.unfetchable.size === 0) return this.o.explicit.length ? this.o.explicit : undefined;
    const names = this.o.explicit.length ? this.o.explicit : this.catalog().map((m) => m.name);
    return names.filter((n) => !this.unfetchable.has(n));
  }

  private choose(views: NodeView[], models: CatalogModel[]): void {
    const choice = allocate(views[0]!, models, this.candidatesFilter());
    if (!choice) {
      if (this.o.explicit.length && !this.toldUnknown) {
        this.toldUnknown = true;
        this.o.log.warn("no model asked for with --model can be served yet: none is in the mesh's catalog", { asked: this.o.explicit.join(","), catalog: models.map((m) => m.name).join(",") });
      }
      return;
    }
    this.take(choice);
  }

  private take(choice: Assignment): void {
    this.o.log.info("assigned a model", { model: choice.model, rule: choice.rule, download: choice.download });
    // Assigned first: who pulls a model nobody has is worked out among the group, this node included.
    this.setAssigned(choice.model);
    if (choice.download) {
      this.o.fetcher.fetch(choice.model, () => this.catalog().find((m) => m.name === choice.model), (why) => this.giveUp(choice.model, why));
    } else this.o.fetcher.cancel();
  }

  /** In a group, but neither its host nor one of its workers. */
  private isSpare(views: NodeView[], models: CatalogModel[]): boolean {
    const mine = this.assigned!;
    const entry = models.find((m) => m.name === mine);
    const plan = entry && this.plan(views, mine, entry.needBytes);
    const self = views[0]!.nodeId;
    return !this.hosting && plan !== undefined && plan.host !== self && !plan.workers.includes(self);
  }

  /** Loads (or reloads over a changed group) the assigned model when this node is its host. */
  private host(views: NodeView[], entry: CatalogModel | undefined): void {
    const name = this.assigned;
    if (!name || !entry) return;
    const model = this.o.store.list().find((m) => m.name === name && hasFiles(m));
    const plan = this.plan(views, name, entry.needBytes);
    const wanted = plan?.workers.join(",");
    const runnable = model && plan?.host === views[0]!.nodeId && entry.capacityBytes >= entry.needBytes;
    this.schedule.layoutIs(name, wanted);
    if (this.hosting !== Boolean(runnable)) {
      this.hosting = Boolean(runnable);
      this.o.mesh()?.announceIfChanged();
    }
    const server = this.o.pool.server(name);
    // Another node hosts it now (one with more memory joined): ours goes once theirs answers, or at
    // once when their split needs an rpc-server ours holds (this node's, or a worker's of ours): an
    // rpc-server serves one client at a time, so theirs would wait for ours to go, and ours for theirs.
    const handOver = plan && plan.host !== views[0]!.nodeId && hostAllowed(this.o.hosts, views[0]!.nodeId, plan.host);
    if (server && !server.draining && plan && handOver && !this.o.replicas?.().replicating.includes(name) && (entry.servedBy === plan.host || holdsWhatTheyNeed(views[0]!.nodeId, this.loadedSplit, plan))) {
      this.o.log.info("another node hosts the model now; unloading ours", { model: name, host: plan.host.slice(0, 10) });
      this.handingOver.add(name);
      void this.o.pool.unload(name).catch(() => this.handingOver.delete(name));
      return;
    }
    if (!runnable || this.o.pool.isLoading(name) || (server && this.loadedSplit === wanted)) {
      clearTimeout(this.settleTimer);
      this.settleTimer = undefined;
      this.schedule.cancel();
      return;
    }
    const delay = this.schedule.delay(wanted, Boolean(server || wanted), this.settleTimer !== undefined);
    if (delay === undefined) return;
    clearTimeout(this.settleTimer);
    this.settleTimer = setTimeout(() => {
      this.settleTimer = undefined;
      this.schedule.cancel();
      if (this.stopped || this.assigned !== name || !this.hosting) return;
      const again = this.o.pool.server(name);
      this.o.log.info(again ? "the group changed; loading the model again across it" : "hosting the model", { model: name, workers: wanted || "none" });
      const load = again ? this.o.pool.reload(model) : this.o.pool.load(model);
      load.then(
        () => this.schedule.loaded(name),
        (err: unknown) => {
          // A load cut short by the node stopping is no failure to report.
          if (this.stopped) return;
          const nextMs = this.schedule.failed(name, wanted, err as Error);
          this.o.log.error("could not load the assigned model", { model: name, error: (err as Error).message.split("\n")[0], next_try_in_s: nextMs / 1000 });
          this.o.mesh()?.announceIfChanged();
          this.reconcileSoon();
        },
      );
    }, delay);
  }

  status(): { assigned: string | null; idle: string[]; fetching: FetchProgress | null; catalog: CatalogModel[] } {
    return { assigned: this.assigned ?? null, idle: [...this.idle], fetching: this.o.fetcher.progress ?? null, catalog: this.catalog() };
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.settleTimer);
    this.o.fetcher.cancel();
  }
}
