/**
 * What this node does about its group now (pure): the state it holds and the mesh's view in, one
 * action out. `GroupReconciler` is the shell that holds the state, calls this on every change and
 * carries the action out (announcing, fetching, loading, unloading, timing the load).
 *
 * In order: a guest leaves any group (the owner's machines do not count it); a node whose group's
 * host let the model go idle leaves it; a node without a model takes one (a node alone and given
 * no `--model` takes none: it serves what it has on demand, like a single box); a spare (in a
 * group that does not use it) moves to a model that cannot run without it or that nobody serves;
 * a member of a group hosts its model when elected: loads it, reloads it over a changed group, or
 * hands it over to the node elected instead.
 */
import type { ServerState } from "../pool/wrapped-server.ts";
import { allocate, type Assignment } from "../placement/allocation.ts";
import { catalog, type CatalogModel, type NodeView } from "../placement/catalog.ts";
import { holdsWhatTheyNeed, type SplitPlan } from "../placement/election.ts";
import { hostAllowed } from "../placement/route.ts";

/** What the reconciler holds of its group. */
export interface GroupState {
  assigned: string | undefined;
  hosting: boolean;
  /** The workers (comma-joined) the server we run of the assigned model was loaded over. */
  loadedSplit: string | undefined;
}

export interface GroupInput {
  /** This node's view first, then its peers'; and the catalog worked out from them. */
  views: readonly NodeView[];
  models: readonly CatalogModel[];
  guest: boolean;
  /** `--model`s: this node chooses among these only. */
  explicit: readonly string[];
  peerCount: number;
  /** The models this node may choose from (none: any), never one it failed to fetch. */
  candidates: readonly string[] | undefined;
  /** `--hosts`. */
  hosts: readonly string[];
  /** The election of a model's host and workers over these views (`SplitPlanner.plan`). */
  plan(views: readonly NodeView[], model: string, needBytes: number): SplitPlan | undefined;
  /** Whether this node has the assigned model's files whole. */
  hasFiles: boolean;
  /** Our server of the assigned model, if one runs (or is going). */
  server: { state: ServerState } | undefined;
  /** A load of the assigned model is under way. */
  loading: boolean;
  /** This node serves the assigned model as a replica: never handed over as the group's. */
  replicating: boolean;
}

export type GroupAction =
  | { do: "nothing" }
  | { do: "leave"; why: "guest" | "idle" }
  /** Take a model (`from`: a spare moving off the one it had). */
  | { do: "take"; choice: Assignment; from?: string }
  /** No model can be chosen yet: the `--model`s asked for are not in the catalog. */
  | { do: "none-to-take" }
  /** Unload ours: `host` hosts the model now. (`hosting` and `workers`, in each host decision: whether we are elected, over which workers.) */
  | { do: "hand-over"; host: string; hosting: boolean; workers: string | undefined }
  /** Nothing to load now (not elected, loading, or loaded over the layout wanted): any load timed is cancelled. */
  | { do: "settle"; hosting: boolean; workers: string | undefined }
  /** Load (or, with a server running, reload) the model over `workers` (comma-joined; "" for none). */
  | { do: "load"; hosting: true; workers: string | undefined; reload: boolean };

export function decideGroup(state: GroupState, input: GroupInput): GroupAction {
  const mine = state.assigned;
  if (input.guest) return mine ? { do: "leave", why: "guest" } : { do: "nothing" };
  if (mine && input.models.find((m) => m.name === mine)?.idle) return { do: "leave", why: "idle" };
  if (!mine) {
    if (input.explicit.length === 0 && input.peerCount === 0) return { do: "nothing" };
    const choice = allocate(input.views[0]!, input.models, input.candidates);
    return choice ? { do: "take", choice } : { do: "none-to-take" };
  }
  if (isSpare(state, input)) {
    const asIfFree = input.views.map((v, i) => (i === 0 ? { ...v, assigned: undefined, hosting: false } : v));
    const better = allocate(asIfFree[0]!, catalog(asIfFree), input.candidates);
    if (better && better.model !== mine && better.rule <= 2) return { do: "take", choice: better, from: mine };
  }
  const entry = input.models.find((m) => m.name === mine);
  return entry ? hostAction(state, input, entry) : { do: "nothing" };
}

/** In a group, but neither its host nor one of its workers. */
function isSpare(state: GroupState, input: GroupInput): boolean {
  const entry = input.models.find((m) => m.name === state.assigned);
  const plan = entry && input.plan(input.views, state.assigned!, entry.needBytes);
  const self = input.views[0]!.nodeId;
  return !state.hosting && plan !== undefined && plan.host !== self && !plan.workers.includes(self);
}

/** The assigned model's host decision: hand over, load, reload over a changed group, or keep. */
function hostAction(state: GroupState, input: GroupInput, entry: CatalogModel): GroupAction {
  const self = input.views[0]!.nodeId;
  const plan = input.plan(input.views, entry.name, entry.needBytes);
  const workers = plan?.workers.join(",");
  const hosting = input.hasFiles && plan?.host === self && entry.capacityBytes >= entry.needBytes;
  if (input.server && input.server.state !== "draining" && plan && mustHandOver(self, state.loadedSplit, plan, entry, input)) return { do: "hand-over", host: plan.host, hosting, workers };
  if (!hosting || input.loading || (input.server && state.loadedSplit === workers)) return { do: "settle", hosting, workers };
  return { do: "load", hosting: true, workers, reload: input.server !== undefined };
}

/**
 * Whether our running server of the model goes because `plan` elects another host (one with more
 * memory joined, `--hosts` allowing it): once theirs answers, or at once when their split needs an
 * rpc-server ours holds (this node's, or a worker's of ours). An rpc-server serves one client at a
 * time, so theirs would wait for ours to go and ours for theirs: the deadlock the lab found.
 */
export function mustHandOver(self: string, loadedSplit: string | undefined, plan: SplitPlan, entry: Pick<CatalogModel, "servedBy">, input: Pick<GroupInput, "hosts" | "replicating">): boolean {
  if (plan.host === self || !hostAllowed(input.hosts, self, plan.host) || input.replicating) return false;
  return entry.servedBy === plan.host || holdsWhatTheyNeed(self, loadedSplit, plan);
}
