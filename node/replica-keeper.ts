/**
 * This node's part in replicas, the shell around `placement/replicas.ts`: on every tick it works the
 * rule out over the mesh's views (every node does, and gets the same answer), and when the rule
 * picks this node for a model it copies the file from a peer if it has none, loads the model alone
 * in its pool and announces it in `replicating`; it unloads a replica the rule releases. A failed
 * copy or load, or an idle release, pauses that model here for a minute (no flapping). Each
 * decision is one log line.
 */
import type { Config } from "../config/config.ts";
import type { CatalogModel, NodeView } from "../placement/catalog.ts";
import { HEARTBEAT_MS } from "./mesh-node.ts";
import { ANNOUNCEMENT_LIMITS } from "../mesh/messages.ts";
import { MAX_REPLICAS_PER_NODE, replicaRelease, replicasToAdd, type DemandSignal, type ReplicaRelease, type ReplicaToAdd } from "../placement/replicas.ts";
import type { Log } from "../base/log.ts";
import type { ModelInfo, ModelStore } from "../models/model-store.ts";
import type { EvictionCause } from "../pool/pool-types.ts";
import type { Pool } from "../pool/pool.ts";
import type { MeshView } from "./mesh-view.ts";
import type { ModelFetcher } from "./model-fetcher.ts";
import { hasFiles } from "./model-fields.ts";
import { shortId } from "../base/short-id.ts";

/**
 * How long a model whose replica failed here (its copy or its load), or went idle here, is not
 * added here again: a host's recent waits outlast a replica's idle time, and must not bring it
 * straight back.
 */
export const REPLICA_PAUSE_MS = 60_000;

export interface ReplicaKeeperOptions {
  /** `--replicas on`: this node takes replicas (it always lets go of those it holds). */
  enabled: boolean;
  /** Where the replicas it holds are kept (the announcer reads them); its own where none is given. */
  holds?: ReplicaHolds;
  /** `--replica-idle`: a replica unused this long goes; 0 = only when its memory is wanted. */
  idleMs: number;
  selfId: () => string | undefined;
  /** Every node's view, ours first. */
  views: () => NodeView[];
  catalog: () => CatalogModel[];
  /** What a node announced of its slots (`demand`), ours included; anything, checked here. */
  demandOf: (nodeId: string) => unknown;
  pool: Pick<Pool, "load" | "unload" | "server" | "loaded" | "limit">;
  store: Pick<ModelStore, "list" | "refresh">;
  /** Copies the model's files from a peer. */
  copy: (model: string, peer: string, entry: CatalogModel | undefined, signal: AbortSignal) => Promise<void>;
  /** Our replicas changed: announce, and decide again. */
  changed: () => void;
  /** Deletes a model's files from the models dir (`ModelAdmin.remove`: only what mesh downloaded, nothing loaded); none: copies stay. */
  remove?: (model: string) => Promise<unknown>;
  log: Log;
}

type Phase = "copying" | "loading" | "ready" | "releasing";

/** The first line of anything thrown (an Error or not), for one log line. */
const oneLine = (err: unknown) => String(err instanceof Error ? err.message : err).split("\n")[0];

/** The demand entries of an announcement that read as such; anything else is none. */
export function demandList(value: unknown): DemandSignal[] | undefined {
  if (!Array.isArray(value)) return undefined;
  const num = (v: unknown) => typeof v === "number" && Number.isFinite(v);
  return value.filter((d): d is DemandSignal => typeof d === "object" && d !== null && typeof d.model === "string" && num(d.queued) && num(d.waitMs)).slice(0, ANNOUNCEMENT_LIMITS.serving);
}

/**
 * Whether the files a replica copied here go with it (pure): only a copy this keeper made (the
 * model was not on disk before), and not when this node wants the model for itself now (its
 * group's model, or loaded here otherwise: pinned, or by a request).
 */
export function copyGoes(model: string, f: { copiedHere: boolean; assigned: string | undefined; loaded: boolean }): boolean {
  return f.copiedHere && f.assigned !== model && !f.loaded;
}

/**
 * The replicas this node holds (copying, loading, serving or being let go) and whether it takes
 * any: what it announces of them. Made before the keeper that changes it, so the announcer (made
 * before the mesh's view, which the keeper reads) is built with it.
 */
export class ReplicaHolds extends Map<string, { phase: Phase; abort: AbortController }> {
  /** The keeper stopped: it takes no more. */
  stopped = false;

  /** `--replicas on`: this node takes replicas (it always lets go of those it holds). */
  constructor(private readonly enabled: boolean) {
    super();
  }

  /** What we announce: the models we hold as replicas (loading or serving), and whether we take them. */
  announced(): { replicating: string[]; takesReplicas: boolean } {
    return { replicating: [...this.keys()].slice(0, ANNOUNCEMENT_LIMITS.replicating), takesReplicas: this.enabled && !this.stopped };
  }
}

export class ReplicaKeeper {
  /** Models whose files this keeper copied from a peer in this process: the only files it deletes. */
  private readonly copied = new Set<string>();
  private readonly held: ReplicaHolds;
  /** Models whose replica failed here, and until when they are not tried again. */
  private readonly paused = new Map<string, number>();
  private timer: Timer | undefined;

  constructor(private readonly o: ReplicaKeeperOptions) {
    this.held = o.holds ?? new ReplicaHolds(o.enabled);
  }

  /** Works the rule out every `everyMs` from now until `stop`. */
  start(everyMs: number): void {
    clearInterval(this.timer);
    this.timer = setInterval(() => this.tick(), everyMs);
    this.timer.unref();
  }

  /** What we announce of our replicas (`ReplicaHolds.announced`). */
  announced(): { replicating: string[]; takesReplicas: boolean } {
    return this.held.announced();
  }

  /**
   * The pool unloads `model`. True when it was one of our replicas (then it is no concern of the
   * group's rules): gone from our list, whether we let it go or the pool made room with it.
   */
  onEvict(model: string, cause: EvictionCause): boolean {
    const h = this.held.get(model);
    if (!h) return false;
    if (h.phase !== "releasing") this.o.log.info("a replica was unloaded by the pool; it is no longer served here", { model, cause });
    this.held.delete(model);
    h.abort.abort();
    this.o.changed();
    this.dropCopy(model);
    return true;
  }

  /** Works the rule out once: lets go of what it releases, and takes what it gives this node. */
  tick(): void {
    // Called from a timer: a throw here would end the node (Bun exits on an uncaught error).
    try {
      this.decide();
    } catch (err) {
      this.o.log.warn("replicas: could not work the rule out this tick", { error: oneLine(err) });
    }
  }

  private decide(): void {
    const self = this.o.selfId();
    if (this.held.stopped || self === undefined) return;
    const views = this.o.views().map((v) => ({ ...v, demand: demandList(this.o.demandOf(v.nodeId)) }));
    const own = views.find((v) => v.nodeId === self);
    if (!own) return;
    const models = this.o.catalog();
    const now = Date.now();
    for (const [model, until] of this.paused) if (until <= now) this.paused.delete(model);
    const serving: { model: string; lastUseMs: number; busy: boolean }[] = [];
    for (const [model, h] of this.held) {
      if (h.phase !== "ready") continue;
      const server = this.o.pool.server(model);
      if (server) serving.push({ model, lastUseMs: server.lastUse, busy: server.busy });
      else {
        // Gone without an unload (its process died): listed still, it would read as a replica on its way
        // and hold back one elsewhere; a failure, so not brought back here at once.
        this.o.log.warn(`a replica's server is gone; not adding it here again for ${REPLICA_PAUSE_MS / 1000} s`, { model });
        this.paused.set(model, now + REPLICA_PAUSE_MS);
        this.forget(model, h);
      }
    }
    for (const r of replicaRelease(own, views, models, serving, now, this.o.idleMs)) this.release(r);
    if (!this.o.enabled) return;
    for (const add of replicasToAdd(views, models)) {
      if (add.node !== self || this.held.has(add.model) || (this.paused.get(add.model) ?? 0) > now) continue;
      if (this.held.size >= MAX_REPLICAS_PER_NODE) break;
      this.add(add, models.find((m) => m.name === add.model)).catch((err: unknown) => this.o.log.warn("replicas: adding one failed", { model: add.model, error: oneLine(err) }));
    }
  }

  private release(r: ReplicaRelease): void {
    const h = this.held.get(r.model);
    if (!h || h.phase === "releasing") return;
    if (r.why === "hosted") {
      this.o.log.info("this node hosts the model for its group now; its replica stays as the group's server", { model: r.model });
      this.held.delete(r.model);
      this.o.changed();
      return;
    }
    const why = r.why === "idle" ? "no request for the replica idle time" : "this node's own model needs the memory";
    this.o.log.info(`releasing a replica: ${why}`, { model: r.model, why: r.why });
    if (r.why === "idle") this.paused.set(r.model, Date.now() + REPLICA_PAUSE_MS);
    h.phase = "releasing";
    this.o.pool
      .unload(r.model)
      .then(
        () => this.forget(r.model, h),
        (err: unknown) => {
          this.o.log.warn("could not unload a replica", { model: r.model, error: oneLine(err) });
          this.forget(r.model, h);
        },
      )
      .catch((err: unknown) => this.o.log.warn("replicas: releasing one failed", { model: r.model, error: oneLine(err) }));
  }

  private forget(model: string, h: { phase: Phase }): void {
    if (this.held.get(model) !== h) return;
    this.held.delete(model);
    this.o.changed();
    this.dropCopy(model);
  }

  /** The replica of `model` is gone: the files it copied here go too, unless this node wants them. */
  private dropCopy(model: string): void {
    const copiedHere = this.copied.delete(model);
    const self = this.o.selfId();
    const assigned = this.o.views().find((v) => v.nodeId === self)?.assigned;
    if (!this.o.remove || !copyGoes(model, { copiedHere, assigned, loaded: this.o.pool.server(model) !== undefined })) return;
    this.o.remove(model).then(
      () => this.o.log.info("deleted the files copied for a replica that is gone", { model }),
      (err: unknown) => this.o.log.warn("could not delete the files copied for a replica", { model, error: oneLine(err) }),
    );
  }

  private fileOf(model: string): ModelInfo | undefined {
    return this.o.store.list().find((m) => m.name === model && hasFiles(m));
  }

  /** A replica takes a free place in the pool only: never one another model of its type holds. */
  private placeFor(info: ModelInfo): boolean {
    const others = this.o.pool.loaded().filter((s) => s.type === info.type && s.model !== info.name);
    return this.o.pool.limit < 0 || others.length < this.o.pool.limit;
  }

  private async add(r: ReplicaToAdd, entry: CatalogModel | undefined): Promise<void> {
    const h = { phase: (r.copyFrom !== undefined && !this.fileOf(r.model) ? "copying" : "loading") as Phase, abort: new AbortController() };
    this.held.set(r.model, h);
    this.o.log.info("adding a replica: every server of the model has requests waiting for a slot", { model: r.model, ...(h.phase === "copying" ? { copy_from: shortId(r.copyFrom!) } : {}) });
    this.o.changed();
    try {
      let info = this.fileOf(r.model);
      if (!info && r.copyFrom !== undefined) {
        await this.o.copy(r.model, r.copyFrom, entry, h.abort.signal);
        this.copied.add(r.model);
        await this.o.store.refresh();
        info = this.fileOf(r.model);
      }
      if (!info) throw new Error("its file is not on this node and could not be copied");
      if (!this.placeFor(info)) throw new Error(`the pool holds ${this.o.pool.limit} model(s) of its type already (--max-loaded-models); a replica takes no other model's place`);
      if (this.held.get(r.model) !== h) return;
      h.phase = "loading";
      await this.o.pool.load(info);
      if (this.held.get(r.model) !== h) return;
      h.phase = "ready";
      this.o.log.info("replica ready", { model: r.model });
      this.o.changed();
    } catch (err) {
      if (this.held.get(r.model) !== h || this.held.stopped) return;
      this.held.delete(r.model);
      this.paused.set(r.model, Date.now() + REPLICA_PAUSE_MS);
      this.o.log.warn(`could not add a replica; not trying it here again for ${REPLICA_PAUSE_MS / 1000} s`, { model: r.model, error: oneLine(err) });
      this.o.changed();
      this.dropCopy(r.model);
    }
  }

  stop(): void {
    this.held.stopped = true;
    clearInterval(this.timer);
    for (const h of this.held.values()) h.abort.abort();
  }
}

/** The keeper of a running node, reading the mesh's view, deciding on the heartbeat's beat (how often demand moves). */
export function nodeReplicaKeeper(
  config: Pick<Config, "replicas" | "replicaIdleMs">,
  n: { holds: ReplicaHolds; view: MeshView; pool: Pool; store: ModelStore; fetcher: ModelFetcher; changed: () => void; remove: (model: string) => Promise<unknown>; log: Log },
): ReplicaKeeper {
  const keeper = new ReplicaKeeper({
    enabled: config.replicas === "on",
    holds: n.holds,
    idleMs: config.replicaIdleMs,
    selfId: () => n.view.selfId(),
    views: () => n.view.views(),
    catalog: () => n.view.catalog(),
    demandOf: (id) => n.view.announcedDemand(id),
    pool: n.pool,
    store: n.store,
    copy: (model, peer, entry, signal) => n.fetcher.copyFromPeer(model, peer, entry, signal),
    remove: n.remove,
    changed: n.changed,
    log: n.log,
  });
  keeper.start(HEARTBEAT_MS);
  return keeper;
}
