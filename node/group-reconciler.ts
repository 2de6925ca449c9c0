/**
 * This node's group in the multi-model mesh: the one owner of the group's state (which model it is
 * assigned, whether it hosts it, the models it let go idle, the split each loaded server runs over,
 * hand-overs, models it cannot get, its load schedule) and the shell that carries out what
 * `decideGroup` (pure, `group-decision.ts`) decides on every change it hears of: leave a group,
 * take or move to a model, host it (load, reload over a changed group, or hand over). It reads the
 * mesh's view and tells it of each change, so the catalog is worked out again then and only then.
 */
import type { Assignment } from "../placement/allocation.ts";
import type { CatalogModel } from "../placement/catalog.ts";
import type { Log } from "../base/log.ts";
import type { ModelStore } from "../models/model-store.ts";
import type { EvictionCause } from "../pool/pool-types.ts";
import type { Pool } from "../pool/pool.ts";
import { decideGroup, type GroupAction } from "./group-decision.ts";
import type { GroupState } from "./group-state.ts";
import type { FetchProgress, ModelFetcher } from "./model-fetcher.ts";
import { hasFiles } from "./model-fields.ts";
import type { MeshView } from "./mesh-view.ts";
import type { SplitPlanner } from "./split-planner.ts";
import { shortId } from "../base/short-id.ts";

export interface GroupReconcilerOptions {
  /** The mesh's view; `heard` tells it of a change, so the catalog is worked out again. */
  view: Pick<MeshView, "selfId" | "peerCount" | "snapshot" | "catalog"> & { heard(): void };
  splits: Pick<SplitPlanner, "plan">;
  store: Pick<ModelStore, "list">;
  pool: Pick<Pool, "server" | "isLoading" | "load" | "reload" | "unload">;
  fetcher: Pick<ModelFetcher, "fetch" | "cancel" | "changed" | "progress">;
  /** Models named with `--model`: this node chooses among these only. */
  explicit: readonly string[];
  /** `--hosts`: the nodes that may serve this node's clients and take over a model it runs (none: any member). */
  hosts: readonly string[];
  /** This node's replicas: never unloaded as a hand-over of its group's model. */
  replicas?: { announced(): { replicating: readonly string[] } };
  /** The group's state, which this reconciler alone changes (the announcer reads it). */
  state: GroupState;
  /** Our state moved: announce it if that changed the announcement. */
  announce: () => void;
  /**
   * This node is a guest of its mesh: the owner's machines never count it in a group, so it takes
   * none and serves what its own clients ask of its own disk, on demand, like a single box.
   */
  guest: () => boolean;
  log: Log;
}

export class GroupReconciler {
  private settleTimer: Timer | undefined;
  private stopped = false;
  private pending = false;
  /** Models whose server we unload because another node hosts them now (not on anyone's request). */
  private readonly handingOver = new Set<string>();
  /** Models whose files we failed to get for good: not chosen again by this node. */
  private readonly unfetchable = new Set<string>();
  /** An explicit --model the mesh does not know yet, said once. */
  private toldUnknown = false;

  private readonly s: GroupState;

  constructor(private readonly o: GroupReconcilerOptions) {
    this.s = o.state;
  }

  /**
   * The pool is unloading a model. One we host that went idle, made room for one asked for on demand
   * (`--evict-mesh-models on`) or was unloaded on request (the API, a console, Ollama's keep_alive 0)
   * frees our group: the mesh shows it unloaded and a request loads it again; a hand-over or reload does not.
   */
  onEvict(model: string, cause: EvictionCause): void {
    const handover = this.handingOver.delete(model);
    // A reload asked for its split before this eviction: that one stays.
    if (cause !== "reload") this.s.loadedSplits.delete(model);
    if (model !== this.s.assigned || cause === "reload" || (cause === "unload" && handover)) return;
    const why = cause === "idle" ? "the model had no requests for the idle time" : cause === "unload" ? "the model was unloaded on request" : "the model made room for one asked for on demand";
    this.o.log.info(`${why}; leaving its group`, { model, cause });
    this.s.idle.add(model);
    this.setAssigned(undefined);
  }

  /** The files of our model cannot be had (a hash that never matches, a refusal): choose another. */
  private giveUp(model: string, why: string): void {
    if (this.s.assigned !== model) return;
    this.o.log.error("giving up on the assigned model; choosing another", { model, why });
    this.unfetchable.add(model);
    this.setAssigned(undefined);
  }

  private setAssigned(model: string | undefined): void {
    this.s.assigned = model;
    this.s.hosting = false;
    this.s.schedule.reset();
    if (model === undefined) this.o.fetcher.cancel();
    this.o.announce();
    this.reconcileSoon();
  }

  /**
   * Decides again on the next turn: not from inside a decision, so changes settle one at a time,
   * and once for a burst of changes heard together (a mesh forming, a member's announcements). The
   * view hears of the change at once, so a request in between reads the mesh as it is.
   */
  reconcileSoon(): void {
    this.o.view.heard();
    if (this.pending) return;
    this.pending = true;
    setImmediate(() => void ((this.pending = false), this.reconcile()));
  }

  /**
   * Decides again (`decideGroup`) and carries the decision out. Every change this node hears of
   * (peers, pool, files) comes through here, so the view is told of it here too.
   */
  reconcile(): void {
    this.o.view.heard();
    if (this.o.view.selfId() === undefined || this.stopped) return;
    // A fetch waiting for a member to pull its model looks again.
    this.o.fetcher.changed();
    const { views, catalog: models } = this.o.view.snapshot();
    const name = this.s.assigned;
    const server = name === undefined ? undefined : this.o.pool.server(name);
    const action = decideGroup(
      { assigned: name, hosting: this.s.hosting, loadedSplit: this.s.loadedSplit },
      {
        views,
        models,
        guest: this.o.guest(),
        explicit: this.o.explicit,
        peerCount: this.o.view.peerCount(),
        candidates: this.candidatesFilter(),
        hosts: this.o.hosts,
        plan: (v, model, need) => this.o.splits.plan(v, model, need),
        hasFiles: name !== undefined && this.o.store.list().some((m) => m.name === name && hasFiles(m)),
        server,
        loading: name !== undefined && this.o.pool.isLoading(name),
        replicating: name !== undefined && (this.o.replicas?.announced().replicating.includes(name) ?? false),
      },
    );
    switch (action.do) {
      case "nothing":
        return;
      case "leave":
        this.o.log.info(action.why === "guest" ? "this node is a guest of its mesh: it leaves its group (the owner's machines do not count it)" : "the group's host let the model go for lack of requests; leaving the group", { model: name });
        return this.setAssigned(undefined);
      case "none-to-take":
        if (this.o.explicit.length && !this.toldUnknown) {
          this.toldUnknown = true;
          this.o.log.warn("no model asked for with --model can be served yet: none is in the mesh's catalog", { asked: this.o.explicit.join(","), catalog: models.map((m) => m.name).join(",") });
        }
        return;
      case "take":
        if (action.from) this.o.log.info("a spare in its group; moving to a model that needs it", { from: action.from, model: action.choice.model, rule: action.choice.rule });
        return this.take(action.choice);
      default:
        return this.host(name!, action);
    }
  }

  /** Models this node may choose from: the --model ones if given, never one it failed to fetch. */
  private candidatesFilter(): string[] | undefined {
    if (this.unfetchable.size === 0) return this.o.explicit.length ? [...this.o.explicit] : undefined;
    const names = this.o.explicit.length ? this.o.explicit : this.o.view.catalog().map((m) => m.name);
    return names.filter((n) => !this.unfetchable.has(n));
  }

  private take(choice: Assignment): void {
    this.o.log.info("assigned a model", { model: choice.model, rule: choice.rule, download: choice.download });
    // Assigned first: who pulls a model nobody has is worked out among the group, this node included.
    this.setAssigned(choice.model);
    if (choice.download) {
      this.o.fetcher.fetch(choice.model, () => this.o.view.catalog().find((m) => m.name === choice.model), (why) => this.giveUp(choice.model, why));
    } else this.o.fetcher.cancel();
  }

  /** Carries out a host decision of the assigned model `name`: hand over, settle, or (re)load once the group settles. */
  private host(name: string, action: Extract<GroupAction, { hosting: boolean }>): void {
    this.s.schedule.layoutIs(name, action.workers);
    if (this.s.hosting !== action.hosting) {
      this.s.hosting = action.hosting;
      this.o.announce();
    }
    if (action.do === "hand-over") {
      this.o.log.info("another node hosts the model now; unloading ours", { model: name, host: shortId(action.host) });
      this.handingOver.add(name);
      void this.o.pool.unload(name).catch(() => this.handingOver.delete(name));
      return;
    }
    if (action.do === "settle") {
      clearTimeout(this.settleTimer);
      this.settleTimer = undefined;
      this.s.schedule.cancel();
      return;
    }
    const wanted = action.workers;
    const delay = this.s.schedule.delay(wanted, Boolean(action.reload || wanted), this.settleTimer !== undefined);
    if (delay === undefined) return;
    clearTimeout(this.settleTimer);
    this.settleTimer = setTimeout(() => {
      this.settleTimer = undefined;
      this.s.schedule.cancel();
      if (this.stopped || this.s.assigned !== name || !this.s.hosting) return;
      const again = this.o.pool.server(name);
      // A request loaded it meanwhile (over this very layout, or still loading): nothing to do again;
      // that load's end is a change, and this node decides again then.
      if (this.o.pool.isLoading(name) || (again && this.s.loadedSplit === wanted)) return;
      const model = this.o.store.list().find((m) => m.name === name && hasFiles(m));
      if (!model) return;
      this.o.log.info(again ? "the group changed; loading the model again across it" : "hosting the model", { model: name, workers: wanted || "none" });
      const load = again ? this.o.pool.reload(model) : this.o.pool.load(model);
      load.then(
        () => this.s.schedule.loaded(name),
        (err: unknown) => {
          // A load cut short by the node stopping is no failure to report.
          if (this.stopped) return;
          const nextMs = this.s.schedule.failed(name, wanted, err as Error);
          this.o.log.error("could not load the assigned model", { model: name, error: (err as Error).message.split("\n")[0], next_try_in_s: nextMs / 1000 });
          this.o.announce();
          this.reconcileSoon();
        },
      );
    }, delay);
  }

  status(): { assigned: string | null; idle: string[]; fetching: FetchProgress | null; catalog: CatalogModel[] } {
    return { assigned: this.s.assigned ?? null, idle: [...this.s.idle], fetching: this.o.fetcher.progress ?? null, catalog: this.o.view.catalog() };
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.settleTimer);
    this.o.fetcher.cancel();
  }
}
