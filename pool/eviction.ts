/**
 * Which wrapped servers a load must evict, decided when the load leaves the queue (pure). Per model
 * type at most `limit` servers (-1: no limit), least recently used first; a server serving a
 * request is never evicted (the load waits), a pinned one never by LRU (all pinned: 409); a load
 * on the NPU evicts every other NPU holder whatever its type. A server this node hosts for the mesh
 * (`meshHeld`) is never evicted by a load: other nodes route its model here, and the mesh would
 * only load it again (the operator may allow it, and the node then lets its group go).
 */
import type { ModelType } from "../models/model-type.ts";
import { npuConflicts, type DeviceMask } from "../models/recipe-devices.ts";

export interface ServerView {
  model: string;
  type: ModelType;
  devices: DeviceMask;
  lastUse: number;
  pinned: boolean;
  /** Serving at least one request (or promised to one that asked for it). */
  busy: boolean;
  /** This server's own idle unload (a client's `keep_alive`): ms, or negative for never; none: the node's. */
  idleMs?: number;
  /** It serves the model this node hosts for its mesh group, and on-demand loads may not take its place. */
  meshHeld?: boolean;
}

export interface LoadWant {
  model: string;
  type: ModelType;
  devices: DeviceMask;
}

export type LoadPlan =
  | { action: "loaded" }
  | { action: "load"; evict: string[] }
  | { action: "wait"; blockedBy: string[] }
  | { action: "reject"; reason: string; heldForMesh?: boolean };

const byLru = (a: ServerView, b: ServerView) => a.lastUse - b.lastUse || a.model.localeCompare(b.model);

export function planLoad(servers: readonly ServerView[], want: LoadWant, limit: number): LoadPlan {
  if (servers.some((s) => s.model === want.model)) return { action: "loaded" };

  const npu = npuConflicts(servers, want.devices);
  const pinnedNpu = npu.filter((s) => s.pinned);
  if (pinnedNpu.length) return { action: "reject", reason: `the NPU is held by pinned model ${pinnedNpu.map((s) => s.model).join(", ")}` };
  const heldNpu = npu.filter((s) => s.meshHeld);
  if (heldNpu.length) return { action: "reject", heldForMesh: true, reason: `the NPU holds ${heldNpu.map((s) => s.model).join(", ")}, hosted here for the mesh; start the node with --evict-mesh-models on to let loads on demand take its place` };
  const busyNpu = npu.filter((s) => s.busy);
  if (busyNpu.length) return { action: "wait", blockedBy: busyNpu.map((s) => s.model) };

  const leaving = new Set(npu.map((s) => s.model));
  const sameType = servers.filter((s) => s.type === want.type && !leaving.has(s.model));
  const excess = limit < 0 ? 0 : sameType.length + 1 - limit;
  if (excess <= 0) return { action: "load", evict: [...leaving] };

  const unpinned = sameType.filter((s) => !s.pinned && !s.meshHeld);
  if (unpinned.length < excess) {
    const held = sameType.filter((s) => s.meshHeld).map((s) => s.model);
    if (held.length) {
      return {
        action: "reject",
        heldForMesh: true,
        reason: `its ${want.type} slot(s) hold ${sameType.map((s) => s.model).join(", ")}, and ${held.join(", ")} is hosted here for the mesh; raise --max-loaded-models, or start the node with --evict-mesh-models on to let loads on demand take its place`,
      };
    }
    return { action: "reject", reason: `all ${limit} ${want.type} slot(s) hold pinned models (${sameType.map((s) => s.model).join(", ")}); unload one or raise --max-loaded-models` };
  }
  const idle = unpinned.filter((s) => !s.busy).sort(byLru);
  if (idle.length < excess) return { action: "wait", blockedBy: unpinned.filter((s) => s.busy).map((s) => s.model) };
  return { action: "load", evict: [...leaving, ...idle.slice(0, excess).map((s) => s.model)] };
}

/** After a failed load: every server goes except those serving requests or held for the mesh ("nuclear"). */
export function planNuclear(servers: readonly ServerView[]): string[] {
  return servers.filter((s) => !s.busy && !s.meshHeld).map((s) => s.model);
}

/** How long a server may sit unused (0: never): its own override where it has one (negative: never), else the node's. */
export function idleLimitMs(override: number | undefined, nodeIdleMs: number): number {
  if (override === undefined) return Math.max(0, nodeIdleMs);
  return override < 0 ? 0 : override;
}

/** Servers idle longer than their limit (`idleLimitMs` of theirs and the node's `idleMs`; 0 = never), not pinned and not busy. */
export function idleVictims(servers: readonly ServerView[], now: number, idleMs: number): string[] {
  return servers
    .filter((s) => {
      const limit = idleLimitMs(s.idleMs, idleMs);
      return limit > 0 && !s.busy && !s.pinned && now - s.lastUse >= limit;
    })
    .map((s) => s.model);
}

/** How often the idle sweep runs for a limit (a quarter of it, 0.1 to 10 s), so an unload comes at most that late. */
export const sweepPeriodMs = (idleMs: number): number => Math.max(100, Math.min(idleMs / 4, 10_000));
