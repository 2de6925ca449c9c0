/**
 * Membership decisions (pure): which of two connections to one peer survives, whom to dial, and
 * when a peer is due a beat.
 */
import type { MemberAddr } from "./join-token.ts";

export interface ConnectionFacts {
  /** Node id of the side that dialed. */
  dialer: string;
  /** The peer's process instance (new on every start), from its hello. */
  instance: string;
}

/**
 * Two live connections to one peer: both ends must keep the same one. A peer that restarted (new
 * instance) always gets its new connection; between simultaneous dials, the one dialed by the
 * smaller node id wins; two dials by the same side keep the newer.
 */
export function keepWhich(selfId: string, peerId: string, existing: ConnectionFacts, incoming: ConnectionFacts): "existing" | "incoming" {
  if (existing.instance !== incoming.instance) return "incoming";
  if (existing.dialer === incoming.dialer) return "incoming";
  const preferred = selfId < peerId ? selfId : peerId;
  return existing.dialer === preferred ? "existing" : "incoming";
}

/** Members we have neither a connection to nor a dial under way, ourselves excluded. */
export function membersToDial(members: readonly MemberAddr[], selfId: string, known: ReadonlySet<string>): MemberAddr[] {
  const out = new Map<string, MemberAddr>();
  for (const m of members) if (m.nodeId !== selfId && !known.has(m.nodeId) && !out.has(m.nodeId)) out.set(m.nodeId, m);
  return [...out.values()];
}

/**
 * A member gets one of our control messages at least every this many heartbeats, even while QUIC's
 * own packets show it we are alive; one none of whose control messages came for this many silence
 * limits is dropped, however alive its QUIC stack looks (its event loop may be stuck): 10 s and
 * 30 s at the node's 2 s and 6 s.
 */
export const CONTROL_EVERY_HEARTBEATS = 5;
export const CONTROL_SILENCE_LIMITS = 5;

/** What this node last sent a peer, and when (ms since the epoch). */
export interface SentToPeer {
  /** It reads beats (`messages.ts`): it judges us alive by any datagram of ours, not by control messages alone. */
  beats: boolean;
  /** Our last control message to it. */
  controlAt: number;
  /** Our last datagram to it seen counted by the transport (none: the transport does not count). */
  lineAt: number | undefined;
}

/**
 * Whether a peer is due a beat now (pure): one that reads beats when it has had nothing of ours
 * for a heartbeat (QUIC's own packets, answers to its messages, our messages: any datagram says we
 * are here), or no control message for `CONTROL_EVERY_HEARTBEATS`; an older one, whose silence limit
 * counts control messages only, after a heartbeat without one.
 */
export function beatDue(sent: SentToPeer, now: number, heartbeatMs: number): boolean {
  if (!sent.beats) return now - sent.controlAt >= heartbeatMs;
  return now - Math.max(sent.controlAt, sent.lineAt ?? 0) >= heartbeatMs || now - sent.controlAt >= CONTROL_EVERY_HEARTBEATS * heartbeatMs;
}

/**
 * Members we knew and are no longer connected to (a partition, a peer that froze), to dial again
 * now: not being dialed, their pause (`nextAt`) over. Without this, two halves of a healed
 * partition that each kept a peer would never look for each other again.
 */
export function dueRedials(remembered: Iterable<string>, busy: ReadonlySet<string>, nextAt: ReadonlyMap<string, number>, now: number): string[] {
  return [...remembered].filter((id) => !busy.has(id) && (nextAt.get(id) ?? 0) <= now);
}

/** Delay before the n-th retry of a join (0-based): doubling from 500 ms, capped at 30 s. */
export function joinBackoffMs(attempt: number): number {
  return Math.min(30_000, 500 * 2 ** Math.min(attempt, 10));
}
