/**
 * A client's Ollama `keep_alive` applies where its model is answered, whichever node that is. The
 * Ollama adapter hands it with its request to the one way into serving (`openAiInference`); the node that
 * answers applies it once the answer is complete, and a node that forwards the request to a peer
 * carries it there in one header (`x-mesh-keep-alive`: whole milliseconds, nothing else), which
 * that peer applies by the same rules. Only a request a member forwarded is read for the header
 * (clients from outside have `keep_alive` on Ollama's routes), so a member affects a model only
 * through a request it sent for that model: after its own answer, never on a pinned server, and an
 * unload lets the requests in flight finish first. Less than a local client may: a member's
 * keep_alive never pins memory here (a negative one is ignored), and members' unloads of one
 * model come at most once per `MEMBER_UNLOAD_EVERY_MS` (its next request reloads it, which for a
 * large model takes minutes: members must not be able to keep a node reloading).
 */
import type { Pool } from "../../pool/pool.ts";
import { KEEP_ALIVE_HEADER } from "../../mesh/mesh-headers.ts";


/** The longest keep_alive the header carries either way (about 31 years): beyond it, dates stop being dates. */
export const MAX_CARRIED_KEEP_ALIVE_MS = 1e12;

/** The header's value for a keep_alive (pure): whole ms within the bound; none when there is nothing to carry. */
export function keepAliveHeaderValue(ms: number | undefined): string | undefined {
  if (ms === undefined || !Number.isFinite(ms)) return undefined;
  const bounded = Math.max(-MAX_CARRIED_KEEP_ALIVE_MS, Math.min(MAX_CARRIED_KEEP_ALIVE_MS, Math.round(ms)));
  return String(Object.is(bounded, -0) ? 0 : bounded);
}

/** The keep_alive a member's header says, in ms (pure): an optional minus and digits within the bound, else none. */
export function parseKeepAliveHeader(value: string | null | undefined): number | undefined {
  if (value === null || value === undefined || !/^-?\d{1,13}$/.test(value)) return undefined;
  const ms = Number(value);
  return Math.abs(ms) <= MAX_CARRIED_KEEP_ALIVE_MS ? ms + 0 : undefined;
}

export type KeepAliveEffect = { action: "none" } | { action: "unload" } | { action: "idle"; ms: number | undefined };

/**
 * What a keep_alive does to the model's server here once the answer is complete (pure): nothing
 * without one or on a pinned one (the operator's pin outranks a client), 0 unloads it, a duration
 * becomes its idle unload, a negative one keeps it loaded, none gives it the node's again.
 */
export function keepAliveEffect(server: { pinned: boolean } | undefined, ms: number | undefined): KeepAliveEffect {
  if (!server || server.pinned) return { action: "none" };
  const idle = keepAliveIdleMs(ms);
  return idle === 0 ? { action: "unload" } : { action: "idle", ms: idle };
}

/** Applies a keep_alive to `model`'s server on this node, and says what it did; an unload waits for the requests in flight. */
export function applyKeepAlive(pool: Pick<Pool, "server" | "unload" | "setIdleUnload">, model: string, ms: number | undefined): KeepAliveEffect {
  const effect = keepAliveEffect(pool.server(model), ms);
  if (effect.action === "unload") pool.unload(model).catch(() => undefined);
  else if (effect.action === "idle") pool.setIdleUnload(model, effect.ms);
  return effect;
}

/** How often members' keep_alive 0 may unload one model on this node. */
export const MEMBER_UNLOAD_EVERY_MS = 5 * 60_000;
/** Models whose last unload by a member is remembered (names come from requests: bounded). */
const REMEMBERED_UNLOADS = 256;

/**
 * What of a member's carried keep_alive this node applies (pure): a duration; an unload unless
 * members unloaded the model less than `MEMBER_UNLOAD_EVERY_MS` ago; never a negative one.
 * Undefined: none at all (the model's idle unload stays as it is).
 */
export function memberKeepAlive(ms: number, lastUnloadAt: number | undefined, now: number): number | undefined {
  if (ms < 0) return undefined;
  if (ms === 0 && lastUnloadAt !== undefined && now - lastUnloadAt < MEMBER_UNLOAD_EVERY_MS) return undefined;
  return ms;
}

/** When members' keep_alive last unloaded each model on this node. */
export class MemberUnloads {
  private readonly at = new Map<string, number>();

  /** The keep_alive to apply for a member's request for `model` (`memberKeepAlive`). */
  allows(model: string, ms: number, now = performance.now()): number | undefined {
    return memberKeepAlive(ms, this.at.get(model), now);
  }

  /** A member's keep_alive unloaded `model`. */
  unloaded(model: string, now = performance.now()): void {
    this.at.delete(model);
    this.at.set(model, now);
    if (this.at.size > REMEMBERED_UNLOADS) this.at.delete(this.at.keys().next().value!);
  }
}

/** The shortest idle unload a keep_alive may set: the idle sweep runs at a fraction of it. */
export const MIN_KEEP_ALIVE_MS = 1_000;

/** The idle unload a keep_alive sets: none, 0 (now), negative (never), or at least MIN_KEEP_ALIVE_MS. */
export function keepAliveIdleMs(ms: number | undefined): number | undefined {
  return ms === undefined || ms <= 0 ? ms : Math.max(MIN_KEEP_ALIVE_MS, ms);
}
