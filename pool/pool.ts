/**
 * The model-type LRU pool of wrapped servers. Loads (and unloads) run one at a time through a
 * queue; each load decides its evictions when it leaves the queue (`planLoad`), waits while its
 * victims are serving, retries once after evicting everything idle when a failure could be memory
 * ("nuclear"; never for a load carrying request arguments, nor with nothing idle to evict), and hands the new server to the
 * requests that asked for it before anything else can evict it.
 */
import { existsSync, mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { ModelInfo } from "../models/model-store.ts";
import { badLoadRequest, loadFailed, loadTimedOut, modelNotFound, slotHeldForMesh, slotsPinned } from "./errors.ts";
import { idleVictims, planLoad, planNuclear, type ServerView } from "./eviction.ts";
import { IdleUnload } from "./idle-unload.ts";
import { readyDeadlineMs, sameOptions, type EvictionCause, type Lease, type LoadOptions, type PendingLoad, type PoolOptions, type RpcSplit } from "./pool-types.ts";
import { resolveDraft } from "./load-launch.ts";
import { newServer } from "./server-spawn.ts";
import { LoadQueue } from "./load-queue.ts";
import { afterFailedStart } from "./load-retry.ts";
import { loadArgs, ServerArgsError } from "./server-args.ts";
import { takeLease } from "./lease.ts";
import { QueueObservers, type QueueFigures, type QueueObserver } from "./slot-queue.ts";
import { isLoaded, takesRequests, WrappedServer } from "./wrapped-server.ts";
import type { SlotCacheCounters } from "./slot-cache.ts";
import { newChildKey, type ChildKey } from "./child-key.ts";
import { CRASH_VERDICT_DELAY_MS } from "./child-process.ts";
import { LoadedServers } from "./loaded-servers.ts";

export type { EvictionCause, Lease, LoadOptions, PoolOptions } from "./pool-types.ts";

/** How long a stopping node waits for its servers' slots to be saved (a systemd stop allows 90 s in all). */
const SAVE_AT_CLOSE_MS = 20_000;

export class Pool {
  private readonly servers: LoadedServers;
  /** The options each server was loaded with, to tell whether a new load asks for something else. */
  private readonly loadedWith = new WeakMap<WrappedServer, LoadOptions>();
  private readonly pending = new Map<string, PendingLoad>();
  /** Loads and unloads, one at a time, and what waits for a server to change. */
  private readonly loads = new LoadQueue();
  private closed = false;
  /** Models with an idle unload queued, so the sweep queues each once. */
  private readonly idleQueued = new Set<string>();
  private readonly idle: IdleUnload;
  private readonly logDir: string;
  private readonly childKey: ChildKey;
  private readonly queueObservers = new QueueObservers();
  /** The most recently loaded model, for `/api/v1/health`'s `model_loaded`. */
  lastLoaded: string | undefined;
  readonly counters = { loads: 0, loadFailures: 0, evictions: new Map<EvictionCause, number>() };

  constructor(private readonly opts: PoolOptions) {
    this.servers = opts.servers ?? new LoadedServers();
    this.logDir = join(opts.stateDir, "logs");
    mkdirSync(this.logDir, { recursive: true });
    this.childKey = newChildKey(opts.stateDir);
    this.idle = new IdleUnload(opts.idleUnloadMs, () => this.sweepIdle());
  }

  /**
   * Gives `model`'s loaded server an idle unload of its own (a client's `keep_alive`): `ms` > 0
   * unloads it after that long unused, negative never, undefined the node's again. Nothing when
   * it is not loaded here.
   */
  setIdleUnload(model: string, ms: number | undefined): void {
    const server = this.servers.get(model);
    if (server) this.idle.set(server, ms);
  }

  /** How long `model`'s server may sit unused before it is unloaded (0: never); `/api/ps` shows when that is. */
  idleUnloadMsOf(model: string): number {
    return this.idle.limitOf(this.servers.get(model));
  }

  get limit(): number {
    return this.opts.maxLoadedModels;
  }

  loaded(): WrappedServer[] {
    return this.servers.loaded();
  }

  server(model: string): WrappedServer | undefined {
    return this.servers.get(model);
  }

  /** What a loaded server's load asked for (Lemonade's `recipe_options`). */
  loadOptionsOf(server: WrappedServer): LoadOptions | undefined {
    return this.loadedWith.get(server);
  }

  /** Each loaded server's queue figures: the demand on its model (for `/metrics` and announcements). */
  queueFigures(): ({ model: string } & QueueFigures)[] {
    return this.loaded()
      .filter((s) => isLoaded(s.state))
      .map((s) => ({ model: s.model, ...s.queue.figures() }));
  }

  /** Tells `observer` of every wait for a slot and every request a full queue refused, from now on. */
  observeQueues(observer: QueueObserver): void {
    this.queueObservers.add(observer);
  }

  isLoading(model: string): boolean {
    return this.pending.has(model);
  }

  private views(): ServerView[] {
    return this.loaded().map((s) => ({ model: s.model, type: s.type, devices: s.devices, lastUse: s.lastUse, pinned: s.pinned, busy: s.busy, idleMs: this.idle.ownOf(s), meshHeld: this.opts.heldForMesh?.(s.model) === true }));
  }

  private notifyChange(): void {
    this.opts.onChange?.();
    this.loads.wake();
  }

  /**
   * A server for `model` with the caller's request counted on it: at once when it is loaded, else
   * after an auto-load. 503 when the load cannot start within the load timeout. A request from
   * `source` (the member that forwarded it, its API key, "local") then takes one of the server's
   * slots, waiting its turn when all are busy (429 when too many wait); one with no source takes
   * none (`/tokenize` and its kind run beside generation).
   */
  async acquire(model: ModelInfo, signal?: AbortSignal, source?: string): Promise<Lease> {
    signal?.throwIfAborted();
    const ready = this.servers.get(model.name);
    if (ready && takesRequests(ready.state)) {
      ready.acquire();
      return takeLease(ready, source, signal);
    }
    const p = this.pending.get(model.name) ?? this.startLoad(model, {}, false);
    p.waiters++;
    let timer: Timer | undefined;
    const aborted = new Promise<never>((_, reject) => {
      if (!p.started) {
        timer = setTimeout(() => {
          if (!p.started) reject(loadTimedOut(`model "${model.name}" could not start loading within ${Math.round(this.opts.loadTimeoutMs / 1000)} s: its slot is busy; try again`, 5));
        }, this.opts.loadTimeoutMs);
      }
      signal?.addEventListener("abort", () => reject(signal.reason), { once: true });
    });
    let server: WrappedServer;
    try {
      server = await Promise.race([p.promise, aborted]);
    } catch (err) {
      // Counted on the server already (it finished in the same tick the caller gave up): give it back.
      if (p.result && p.result.state !== "failed") p.result.release();
      else {
        p.waiters--;
        // A load nobody waits for any more may be waiting for a slot: let it notice.
        this.notifyChange();
      }
      throw err;
    } finally {
      clearTimeout(timer);
    }
    return takeLease(server, source, signal);
  }

  /** Explicit load (`/api/v1/load`, `--model`): resolves when the server is ready. */
  async load(model: ModelInfo, options: LoadOptions = {}): Promise<WrappedServer> {
    const existing = this.servers.get(model.name);
    if (existing && takesRequests(existing.state) && sameOptions(this.loadedWith.get(existing), options)) {
      if (options.pinned !== undefined) existing.pin(options.pinned);
      existing.touch();
      return existing;
    }
    const pending = this.pending.get(model.name);
    if (pending && sameOptions(pending.options, options)) {
      pending.explicit = true;
      const server = await pending.promise;
      if (options.pinned !== undefined) server.pin(options.pinned);
      return server;
    }
    return this.startLoad(model, options, true).promise;
  }

  private startLoad(model: ModelInfo, options: LoadOptions, explicit: boolean): PendingLoad {
    const p: PendingLoad = {
      model,
      options,
      waiters: 0,
      explicit,
      started: false,
      result: undefined,
      promise: Promise.resolve(undefined as never),
    };
    p.promise = this.loads.run(() => this.runLoad(p)).finally(() => {
      if (this.pending.get(model.name) === p) this.pending.delete(model.name);
    });
    p.promise.catch(() => undefined);
    this.pending.set(model.name, p);
    return p;
  }

  private async runLoad(p: PendingLoad): Promise<WrappedServer> {
    const { model, options } = p;
    const abandoned = () => !p.explicit && p.waiters === 0;
    const giveUpIfNeeded = () => {
      if (this.closed) throw loadFailed(`the node is shutting down; "${model.name}" was not loaded`);
      if (abandoned()) throw loadTimedOut(`load of "${model.name}" abandoned: every request for it gave up`, 5);
    };
    giveUpIfNeeded();
    if (!existsSync(model.path)) throw modelNotFound(`model "${model.name}": file ${model.path} does not exist`);
    if (model.problem) throw modelNotFound(`model "${model.name}": ${model.problem}`);
    let extraArgs: string[];
    try {
      // The operator's free-form arguments (node-wide, then the model's), then the request's allowlisted ones.
      extraArgs = loadArgs(this.opts.defaultArgs, model.llamacppArgs, options);
    } catch (err) {
      throw err instanceof ServerArgsError ? badLoadRequest(err.message) : err;
    }

    // A bad draft refuses the load before anything is split, drained or evicted for it.
    const draft = await resolveDraft(model, options, this.opts.knownModels);
    const split = (await this.opts.rpcWorkersFor?.(options.ctxSize ? { ...model, ctxSize: options.ctxSize } : model)) ?? { endpoints: [] };
    const current = this.servers.get(model.name);
    if (current && !sameOptions(this.loadedWith.get(current), options)) await this.drainAndEvict(model.name, "reload");

    for (;;) {
      const plan = planLoad(this.views(), { model: model.name, type: model.type, devices: model.devices }, this.opts.maxLoadedModels);
      if (plan.action === "loaded") {
        const server = this.servers.get(model.name)!;
        return this.handOver(p, server);
      }
      if (plan.action === "reject") throw (plan.heldForMesh ? slotHeldForMesh : slotsPinned)(`cannot load "${model.name}": ${plan.reason}`);
      if (plan.action === "wait") {
        this.opts.log.info("load waits for busy servers", { model: model.name, busy: plan.blockedBy.join(",") });
        await this.loads.nextChange();
        giveUpIfNeeded();
        continue;
      }
      // From here the load is under way: its requests wait for it, not for a slot.
      p.started = true;
      const cause = (victim: string) => (this.servers.get(victim)?.type === model.type ? "lru" : "npu");
      await Promise.all(plan.evict.map((victim) => this.evict(victim, cause(victim))));
      break;
    }

    let server: WrappedServer;
    try {
      server = await this.spawnReady(model, options, extraArgs, split, draft);
    } catch (first) {
      if (this.closed) throw loadFailed(`the node is shutting down; "${model.name}" was not loaded`);
      if (!existsSync(model.path)) throw modelNotFound(`model "${model.name}": file ${model.path} does not exist`);
      const error = (first as Error).message;
      const next = afterFailedStart(model.name, options, error, planNuclear(this.views()));
      if (!next.retry) {
        this.counters.loadFailures++;
        this.opts.log.warn("load failed; evicting nothing: freeing memory would not change it", { model: model.name, error: error.split("\n")[0] });
        throw loadFailed(next.message);
      }
      this.opts.log.warn("load failed; evicting every idle server and retrying once", { model: model.name, evicting: next.evict.join(","), error: error.split("\n")[0] });
      await Promise.all(next.evict.map((victim) => this.evict(victim, "nuclear")));
      try {
        server = await this.spawnReady(model, options, extraArgs, split, draft);
      } catch (second) {
        this.counters.loadFailures++;
        throw loadFailed(`model "${model.name}" failed to load: ${(second as Error).message}`);
      }
    }
    this.loadedWith.set(server, options);
    this.lastLoaded = model.name;
    this.counters.loads++;
    this.notifyChange();
    return this.handOver(p, server);
  }

  /** Counts every waiting request on the server in the same tick the load completes. */
  private handOver(p: PendingLoad, server: WrappedServer): WrappedServer {
    for (let i = 0; i < p.waiters; i++) server.acquire();
    p.result = server;
    p.started = true;
    return server;
  }

  private async spawnReady(model: ModelInfo, options: LoadOptions, extraArgs: string[], split: RpcSplit, draft: ModelInfo | undefined): Promise<WrappedServer> {
    if (this.closed) throw new Error("the pool is closed");
    const { server, port, threads } = newServer({ ...this.opts, childKey: this.childKey, logDir: this.logDir, queueObserver: this.queueObservers }, { model, options, extraArgs, split, draft });
    this.servers.set(model.name, server);
    // A request's release wakes what waits inside the pool for a server to go idle, and tells no one else.
    server.onChange((s, why) => (why === "release" ? this.loads.wake() : this.onServerChange(s)));
    this.opts.log.info("loading model", { model: model.name, type: model.type, port, pid: server.pid, rpc: split.endpoints.join(",") || undefined, draft: draft?.name, threads });
    const started = performance.now();
    try {
      await server.waitReady(readyDeadlineMs(model.sizeBytes));
    } catch (err) {
      if (this.servers.get(model.name) === server) this.servers.delete(model.name);
      throw err;
    }
    this.opts.log.info("model ready", { model: model.name, ms: Math.round(performance.now() - started) });
    return server;
  }

  /** What the slot cache did (`/metrics`); none when the node keeps no slots. */
  get slotCounters(): SlotCacheCounters | undefined {
    return this.opts.slotCache?.counters;
  }

  /** A ready server's slots kept on disk before it stops (`slot-cache.ts`). */
  private async saveSlots(server: WrappedServer): Promise<void> {
    if (isLoaded(server.state)) await this.opts.slotCache?.save(server);
  }

  private onServerChange(s: WrappedServer): void {
    if ((s.state === "failed" || s.state === "stopped") && this.servers.get(s.model) === s) {
      this.servers.delete(s.model);
      // A server that exited on its own crashed, unless the node shuts down by then (`CRASH_VERDICT_DELAY_MS`).
      const crashed = () => void (this.closed || this.opts.log.error("llama-server exited unexpectedly; the next request reloads it", { model: s.model, log: s.logPath }));
      if (s.state === "failed") setTimeout(crashed, CRASH_VERDICT_DELAY_MS).unref();
    }
    this.notifyChange();
  }

  private async evict(model: string, cause: EvictionCause): Promise<void> {
    const server = this.servers.get(model);
    if (!server) return;
    this.servers.delete(model);
    this.counters.evictions.set(cause, (this.counters.evictions.get(cause) ?? 0) + 1);
    this.opts.log.info("unloading model", { model, cause });
    // Told before the stop: what the node decides from it must not race a reload the stop would prompt.
    this.opts.onEvict?.(model, cause);
    await this.saveSlots(server);
    await server.stop();
    this.notifyChange();
  }

  /**
   * Takes a server out of routing at once (new requests queue a fresh load behind this), lets the
   * requests it serves finish, then stops it.
   */
  private async drainAndEvict(name: string, cause: EvictionCause): Promise<void> {
    const server = this.servers.get(name);
    if (!server) return;
    server.drain();
    while (server.busy && this.servers.get(name) === server) await this.loads.nextChange();
    await this.evict(name, cause);
  }

  /** Loads a model again (after its requests finish), e.g. because the workers it splits over changed. */
  async reload(model: ModelInfo): Promise<WrappedServer> {
    const current = this.servers.get(model.name);
    current?.drain();
    await this.loads.run(() => this.drainAndEvict(model.name, "reload"));
    return this.load(model, (current && this.loadedWith.get(current)) ?? {});
  }

  /** Unloads one model after its requests finish (404 when it is not loaded), or every model. */
  async unload(model?: string): Promise<string[]> {
    if (model !== undefined && !this.servers.has(model) && !this.pending.has(model)) {
      throw modelNotFound(`model "${model}" is not loaded`);
    }
    const names = model === undefined ? [...this.servers.keys()] : [model];
    for (const name of names) {
      const server = this.servers.get(name);
      server?.drain();
    }
    return this.loads.run(async () => {
      await Promise.all(names.map((name) => this.drainAndEvict(name, "unload")));
      return names;
    });
  }

  private sweepIdle(): void {
    for (const model of idleVictims(this.views(), Date.now(), this.opts.idleUnloadMs)) {
      if (this.idleQueued.has(model)) continue;
      this.idleQueued.add(model);
      void this.loads.run(async () => {
        this.idleQueued.delete(model);
        // Still idle when its turn comes?
        if (idleVictims(this.views(), Date.now(), this.opts.idleUnloadMs).includes(model)) await this.evict(model, "idle");
      });
    }
  }

  /**
   * The node shuts down: loads are refused from here, while the servers loaded keep serving the
   * requests in flight until `close()`.
   */
  beginShutdown(): void {
    this.closed = true;
  }

  /** Stops every server and refuses further loads (node shutdown). */
  async close(): Promise<void> {
    this.beginShutdown();
    this.idle.stop();
    this.notifyChange();
    const all = this.loaded();
    this.servers.clear();
    // Its conversations' caches outlive the node too, as long as a stop may wait for them.
    await Promise.race([Promise.all(all.map((s) => this.saveSlots(s))), Bun.sleep(SAVE_AT_CLOSE_MS)]);
    await Promise.all(all.map((s) => s.stop()));
    // A load that was starting a server when we closed stops it on its own; wait for that.
    await this.loads.settled(10_000);
    await Promise.all(this.loaded().map((s) => s.stop()));
    // No child is left to read it; a crash leaves it, and the next start writes a new key over it.
    rmSync(this.childKey.file, { force: true });
  }
}

