/**
 * Which of a model's servers (its host and its replicas) a request goes to (pure). Requests that
 * share an affinity key (a session, a user, a conversation's opening) go to the same server, so
 * its KV cache holds their prefix: rendezvous (highest-random-weight) hashing of key and server
 * ranks the servers alike on every node, and a server that leaves moves only its own keys. The
 * first-ranked takes the request while it is not overloaded; otherwise, and for requests with
 * no key, the least loaded does. This node's own server, when it is one of them, takes its own
 * clients' requests first while it has a free slot: another member's word that it serves the model
 * (its announcement) draws only the overflow, never the prompts this node can answer itself.
 */

/** What a server last announced about a model: its slots, requests running and waiting. */
export interface AnnouncedLoad {
  slots: number;
  inFlight: number;
  queued: number;
}

export interface ServerLoad {
  nodeId: string;
  /** Requests this node has in flight there now. */
  outstanding: number;
  /** From its announcement, when it gives one (it counts every node's requests, a heartbeat late). */
  announced?: AnnouncedLoad;
}

export interface PickRequest {
  servers: readonly ServerLoad[];
  /** The request's affinity key; none: the least loaded server. */
  key: string | undefined;
  /** Servers not to use (one that just failed this request). */
  avoid?: ReadonlySet<string>;
  /** Turns over equally loaded servers for requests without a key (a counter), so an idle mesh shares them. */
  turn?: number;
  /** This node's id: its own server (its load read live, with its slots) goes first while a slot is free. */
  own?: string;
}

/**
 * How many requests more than the least loaded server the preferred one may carry (once its slots
 * are full) before its keys go elsewhere: a cache hit is worth a short wait, not a long queue.
 */
export const AFFINITY_MARGIN = 2;

/** A server's load: the larger of what we know we sent it and what it last said it carries. */
export function loadOf(s: ServerLoad): number {
  return s.announced ? Math.max(s.outstanding, s.announced.inFlight + s.announced.queued) : s.outstanding;
}

const weight = (key: string, nodeId: string) => Bun.hash.wyhash(`${key}\u0000${nodeId}`);

/** The servers in the order a key prefers them: highest weight first, ties (never, in practice) by id. */
export function rankFor<T extends { nodeId: string }>(key: string, servers: readonly T[]): T[] {
  return servers
    .map((s) => ({ s, w: weight(key, s.nodeId) }))
    .sort((a, b) => (a.w === b.w ? (a.s.nodeId < b.s.nodeId ? -1 : 1) : a.w > b.w ? -1 : 1))
    .map((x) => x.s);
}

/** The server the request goes to, or undefined when every one is avoided (or there is none). */
export function pickServer(req: PickRequest): string | undefined {
  const open = req.servers.filter((s) => !req.avoid?.has(s.nodeId));
  if (open.length === 0) return undefined;
  const own = open.find((s) => s.nodeId === req.own);
  if (own?.announced && loadOf(own) < own.announced.slots) return own.nodeId;
  const ranked = rankFor(req.key ?? "", open);
  const least = Math.min(...ranked.map(loadOf));
  if (req.key !== undefined) {
    const top = ranked[0]!;
    const load = loadOf(top);
    const slots = top.announced?.slots;
    if ((slots !== undefined && load < slots) || load < least + AFFINITY_MARGIN) return top.nodeId;
    // Overloaded: the least loaded, the key's next choice among equals, so its overflow stays together too.
    return ranked.find((s) => loadOf(s) === least)!.nodeId;
  }
  const idlest = ranked.filter((s) => loadOf(s) === least);
  return idlest[(req.turn ?? 0) % idlest.length]!.nodeId;
}

/**
 * A peer's announced load for `model` from its announcement's `demand` list (pure): none when it
 * announces none (an older node) or the entry does not read as counts.
 */
export function announcedLoad(announcement: unknown, model: string): AnnouncedLoad | undefined {
  const demand = (announcement as { demand?: unknown } | undefined)?.demand;
  if (!Array.isArray(demand)) return undefined;
  const d = demand.find((x: unknown) => (x as { model?: unknown } | null)?.model === model) as Record<string, unknown> | undefined;
  const count = (v: unknown) => (typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : undefined);
  const slots = count(d?.slots);
  const inFlight = count(d?.inFlight);
  const queued = count(d?.queued);
  return slots !== undefined && inFlight !== undefined && queued !== undefined ? { slots, inFlight, queued } : undefined;
}
