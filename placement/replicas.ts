/**
 * Replicas (pure; every node works out the same answer from the same announcements): when every
 * server of a model is pressed (requests wait for a slot), one more node loads it alone beside its
 * host, so the mesh serves it from two places; that replica goes again after it sat idle, or at
 * once when the node's memory is wanted for a model of its own. A replica is never a model's host
 * nor one of its workers: it serves requests and nothing else depends on it.
 *
 * One replica per model is added at a time (none while another is still on its way), on a node
 * that takes replicas, is not in the model's split, has the memory free (what it offers minus
 * what it serves and what its own group's split holds on it) and has the file or can copy it from
 * a peer. Among several: the most free memory, then the larger node id (as election breaks ties).
 */
import { byCodePoint, splitCandidates, type CatalogModel, type NodeView } from "./catalog.ts";
import { splitPlan, type SplitPlan } from "./election.ts";

/** A request waiting this long for a slot, in the last window, says the server is short of slots. */
export const PRESSED_WAIT_MS = 250;
/** Replicas one node holds at most: each is a whole model in its memory. */
export const MAX_REPLICAS_PER_NODE = 2;

/** What a node announces about one model's slots (its `demand`): only what this rule reads. */
export interface DemandSignal {
  model: string;
  /** Requests waiting for a slot now. */
  queued: number;
  /** The longest wait for a slot among requests served in the last window. */
  waitMs: number;
}

/** A node's view as this rule reads it: its announced demand may be absent (an older node). */
export type ReplicaView = NodeView & { demand?: readonly DemandSignal[] | undefined };

/** Requests wait for this server's slots (queued now, or waited long lately). Junk reads as not pressed. */
export function pressed(demand: DemandSignal | undefined): boolean {
  return demand !== undefined && (demand.queued > 0 || demand.waitMs >= PRESSED_WAIT_MS);
}

const demandOf = (v: ReplicaView, model: string) => (Array.isArray(v.demand) ? v.demand : []).filter((d) => d?.model === model);
const isPressed = (v: ReplicaView, model: string) => demandOf(v, model).some(pressed);

export interface ReplicaToAdd {
  model: string;
  node: string;
  /** A peer to copy the file from, when the node has none. */
  copyFrom?: string;
}

/** Every model's split as its group works it out. */
function plans(views: readonly NodeView[], models: readonly CatalogModel[]): Map<string, SplitPlan | undefined> {
  const out = new Map<string, SplitPlan | undefined>();
  for (const m of models) if (views.some((v) => v.assigned === m.name)) out.set(m.name, splitPlan(splitCandidates(views, m.name), m.needBytes));
  return out;
}

/**
 * The node's own model (its group's) waits for memory (needs-capacity): the whole node goes to it.
 * Such a node takes no replica and releases those it holds; both sides read this one predicate, or
 * a node outside its model's split plan (so holding none of it) would be given a replica it drops.
 */
export function ownModelWantsMemory(v: NodeView, models: readonly CatalogModel[]): boolean {
  return v.assigned !== undefined && models.some((m) => m.name === v.assigned && m.status === "needs-capacity");
}

const inPlan = (plan: SplitPlan | undefined, id: string) => plan !== undefined && (plan.host === id || plan.workers.includes(id));

/**
 * The memory a node holds for models now (pure): each model its servers answer for or that it
 * loads as a replica, and its group's model when it is that split's host or a worker (a spare
 * holds none), each at most what the node offers.
 */
export function heldBytes(v: NodeView, models: readonly CatalogModel[], planOf: ReadonlyMap<string, SplitPlan | undefined>, without: ReadonlySet<string> = new Set()): number {
  const need = new Map(models.map((m) => [m.name, m.needBytes]));
  const held = new Set([...v.ready, ...(v.replicating ?? [])]);
  if (v.assigned !== undefined && inPlan(planOf.get(v.assigned), v.nodeId)) held.add(v.assigned);
  let sum = 0;
  for (const name of held) if (!without.has(name)) sum += Math.min(need.get(name) ?? 0, v.vramBytes);
  return sum;
}

/** The replicas to add now, at most one per model: every node computes the same list and acts on its own rows. */
export function replicasToAdd(views: readonly ReplicaView[], models: readonly CatalogModel[]): ReplicaToAdd[] {
  const planOf = plans(views, models);
  const free = new Map(views.map((v) => [v.nodeId, v.vramBytes - heldBytes(v, models, planOf)]));
  const count = new Map(views.map((v) => [v.nodeId, new Set(v.replicating ?? []).size]));
  const out: ReplicaToAdd[] = [];
  for (const m of [...models].sort((a, b) => byCodePoint(a.name, b.name))) {
    const servers = views.filter((v) => v.ready.includes(m.name));
    if (servers.length === 0 || !servers.every((s) => isPressed(s, m.name))) continue;
    // One on its way (copying or loading) is waited for: the demand it takes is not seen yet.
    if (views.some((v) => v.replicating?.includes(m.name) && !v.ready.includes(m.name))) continue;
    const plan = planOf.get(m.name);
    // A copy is taken only from a holder of the content the mesh knows the model by.
    const holders = m.copyFrom;
    const candidates = views.filter((v) => {
      if (v.takesReplicas !== true || v.ready.includes(m.name) || inPlan(plan, v.nodeId) || ownModelWantsMemory(v, models)) return false;
      if ((count.get(v.nodeId) ?? 0) >= MAX_REPLICAS_PER_NODE || (free.get(v.nodeId) ?? 0) < m.needBytes) return false;
      const hasFile = v.modelsOnDisk.some((d) => d.name === m.name);
      return hasFile || (v.fetches !== false && holders.some((id) => id !== v.nodeId));
    });
    const best = candidates.sort((a, b) => free.get(b.nodeId)! - free.get(a.nodeId)! || byCodePoint(b.nodeId, a.nodeId))[0];
    if (!best) continue;
    const hasFile = best.modelsOnDisk.some((d) => d.name === m.name);
    const copyFrom = hasFile ? undefined : holders.filter((id) => id !== best.nodeId).sort(byCodePoint)[0];
    out.push({ model: m.name, node: best.nodeId, ...(copyFrom !== undefined ? { copyFrom } : {}) });
    // The same round must not give one node's memory to two models.
    free.set(best.nodeId, free.get(best.nodeId)! - m.needBytes);
    count.set(best.nodeId, count.get(best.nodeId)! + 1);
  }
  return out;
}

/** A replica this node holds, as its pool sees it. */
export interface HeldReplica {
  model: string;
  /** When its server last finished a request (or loaded), ms since the epoch. */
  lastUseMs: number;
  /** Requests are in flight on it now. */
  busy: boolean;
}

export type ReleaseReason =
  /** No request for the idle time: unload it. */
  | "idle"
  /** A model of this node's own (its group's split, or one it serves) needs the memory: unload it now. */
  | "needs-capacity"
  /** This node hosts the model for its group now: the server stays, as the group's, no longer a replica. */
  | "hosted";

export interface ReplicaRelease {
  model: string;
  why: ReleaseReason;
}

/**
 * Which of this node's replicas go now (pure). `self` is this node's view (its first in `views`).
 * Memory for this node's own models comes first: while what they hold plus the replicas is more
 * than it offers, replicas go, the least recently used first, until the rest fit.
 */
export function replicaRelease(
  self: NodeView,
  views: readonly NodeView[],
  models: readonly CatalogModel[],
  held: readonly HeldReplica[],
  nowMs: number,
  idleMs: number,
): ReplicaRelease[] {
  const out: ReplicaRelease[] = [];
  const left: HeldReplica[] = [];
  for (const r of held) {
    if (self.assigned === r.model && self.hosting === true) out.push({ model: r.model, why: "hosted" });
    else if (!r.busy && idleMs > 0 && nowMs - r.lastUseMs >= idleMs) out.push({ model: r.model, why: "idle" });
    else left.push(r);
  }
  const planOf = plans(views, models);
  const need = new Map(models.map((m) => [m.name, Math.min(m.needBytes, self.vramBytes)]));
  const replicas = new Set(held.map((r) => r.model));
  // What this node's own models hold: everything but its replicas.
  const own = heldBytes(self, models, planOf, replicas);
  // Its group's model waits for memory (needs-capacity) when this node is in it: the whole node goes to it.
  const wanted = ownModelWantsMemory(self, models);
  let used = own + left.reduce((s, r) => s + (need.get(r.model) ?? 0), 0);
  for (const r of [...left].sort((a, b) => a.lastUseMs - b.lastUseMs || byCodePoint(a.model, b.model))) {
    if (!wanted && used <= self.vramBytes) break;
    out.push({ model: r.model, why: "needs-capacity" });
    used -= need.get(r.model) ?? 0;
  }
  return out;
}
