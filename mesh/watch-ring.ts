/**
 * Who watches whom (pure). Every member keeps a connection to every other, but beats only its
 * ring neighbours: the `RING_SIDE` members before it and after it when all members' ids are
 * sorted in a circle. Everyone else it judges by QUIC's own keep-alives, which iroh sends every 5 s
 * on an idle connection without our code running, so an idle member's cost per peer is iroh's
 * upkeep alone rather than a message every heartbeat. A neighbour that falls silent is dropped at
 * the usual limit, and the members that saw it go tell the others (`lost`), who each check for
 * themselves with one probe rather than believe them. Meshes of up to 2 × `RING_SIDE` + 1 members
 * are all neighbours: everyone beats everyone, as before the ring.
 */

/** Neighbours on each side of the ring: 6 watchers per member, so a tenth of 50 killed at once leaves each one several. */
export const RING_SIDE = 3;
/** How often iroh 1.x sends a keep-alive on an idle connection (measured: 5.0 s each way, `tests/e2e/quic-keepalive.test.ts`). */
export const QUIC_KEEPALIVE_MS = 5_000;
/** Without a datagram this long, a member we do not watch is gone: two keep-alives missed, and room for a busy machine. */
export const UNWATCHED_SILENCE_MS = 2 * QUIC_KEEPALIVE_MS + 2_000;
/**
 * A member that beat us as its neighbour is watched back this many heartbeats after its last such
 * beat (its view of the ring may differ from ours for a while): twice the longest gap between a
 * watcher's control messages (`CONTROL_EVERY_HEARTBEATS`).
 */
export const WATCH_BACK_HEARTBEATS = 10;
/** `lost` notices acted on per member and heartbeat: a member drops few at once (its neighbours), and each costs us a probe. */
export const LOST_NOTICES_PER_HEARTBEAT = 2 * RING_SIDE;
/**
 * How often the datagram counts of a member we do not watch are read (those we watch: every look,
 * half a second). Reading one takes its connection's lock, which the connection's driver takes
 * too: on bare iroh endpoints with 49 idle connections, reading every count twice a second cost
 * about a third of a percent of a core more than every 2 s. A count 2.5 s old is fresh enough for
 * a 12 s limit.
 */
export const UNWATCHED_COUNT_MS = 2_500;
/** After a member said another fell silent: no datagram from it this long after our probe, and it is gone. */
export const PROBE_MS = 1_000;

/**
 * The ring neighbours of `selfId` among `ids` (`RING_SIDE` each way, by id order, wrapping): all
 * of them when there are at most `2 × side` others.
 */
export function ringNeighbours(selfId: string, ids: Iterable<string>, side = RING_SIDE): Set<string> {
  const others = [...new Set(ids)].filter((id) => id !== selfId);
  if (others.length <= 2 * side) return new Set(others);
  const ring = [...others, selfId].sort();
  const at = ring.indexOf(selfId);
  const out = new Set<string>();
  for (let step = 1; step <= side; step++) {
    out.add(ring[(at + step) % ring.length]!);
    out.add(ring[(at - step + ring.length) % ring.length]!);
  }
  return out;
}

/** What this node knows of a peer that decides whether it watches it. */
export interface WatchFacts {
  /** The peer takes part in the ring (it announces `ring`), and its connection counts datagrams: without both, it is watched. */
  ringAware: boolean;
  /** It is one of our ring neighbours. */
  neighbour: boolean;
  /** Its last beat that named us its neighbour (ms since the epoch). */
  watchedByAt?: number;
  /** A member said it fell silent: watched from then (ms since the epoch), until it proves alive. */
  suspectSince?: number;
}

/** Whether this node watches the peer now: beats it, and drops it at the short limits. */
export function watches(f: WatchFacts, now: number, heartbeatMs: number): boolean {
  if (!f.ringAware || f.neighbour || f.suspectSince !== undefined) return true;
  return f.watchedByAt !== undefined && now - f.watchedByAt < WATCH_BACK_HEARTBEATS * heartbeatMs;
}

/**
 * How long a peer may go unheard before it is probably gone (routing sends its requests elsewhere,
 * the console says "silent"), though not dropped yet: two heartbeats, and one keep-alive more for
 * a member we do not watch, which is heard from at QUIC's keep-alives only.
 */
export function probablyGoneAfterMs(watched: boolean, heartbeatMs: number): number {
  return 2 * heartbeatMs + (watched ? 0 : QUIC_KEEPALIVE_MS);
}

/** How long a peer may go without a datagram, and without a control message, before it is dropped. */
export interface SilenceLimits {
  datagramMs: number;
  /** None: a member we do not watch sends us no control message while nothing changes. */
  controlMs: number | undefined;
}

/** What this node saw of a peer's silence (ms since the epoch). */
export interface HeardFrom {
  /** Its last datagram (or control message where the transport does not count datagrams). */
  lastSeen: number;
  /** Its last control message. */
  heardAt: number;
  /** Since when we watch it: a control limit counts from then at the earliest. */
  watchedSince: number;
}

/** Why the peer is gone by `limits`, or undefined while it is within them. */
export function silenceVerdict(h: HeardFrom, limits: SilenceLimits, now: number): string | undefined {
  if (now - h.lastSeen > limits.datagramMs) return `silent for over ${limits.datagramMs} ms`;
  if (limits.controlMs !== undefined && now - Math.max(h.heardAt, h.watchedSince) > limits.controlMs) return `no control message for over ${limits.controlMs} ms`;
  return undefined;
}

/** The limits for a peer we watch or not, at the node's peer timeout (`CONTROL_SILENCE_LIMITS` of them for control messages). */
export function silenceLimits(watched: boolean, peerTimeoutMs: number, controlLimits: number): SilenceLimits {
  if (watched) return { datagramMs: peerTimeoutMs, controlMs: controlLimits * peerTimeoutMs };
  return { datagramMs: Math.max(peerTimeoutMs, UNWATCHED_SILENCE_MS), controlMs: undefined };
}
