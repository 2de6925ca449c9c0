/**
 * The members this node holds now, each with its connection, control stream, announcement and
 * standing. The membership admits and drops them; the node's parts are built with the table before
 * the membership exists, and read it (and open streams to its peers) from then on.
 */
import type { Announcement } from "./messages.ts";
import type { Standing } from "./peer-standings.ts";
import { beatDue, CONTROL_SILENCE_LIMITS } from "./membership-rules.ts";
import { LOST_NOTICES_PER_HEARTBEAT, PROBE_MS, ringNeighbours, silenceLimits, silenceVerdict, UNWATCHED_COUNT_MS, watches } from "./watch-ring.ts";
import { Replacements } from "./replacements.ts";
import type { PeerConnection, Stream } from "./transport.ts";

export interface Peer {
  id: string;
  conn: PeerConnection;
  control: Stream;
  dialer: string;
  announcement: Announcement;
  /** When we last heard from it: a control message, or any datagram where the transport counts them. */
  lastSeen: number;
  /** When its last control message came. */
  heardAt: number;
  /** Our last control message to it, and our last datagram to it the transport counted (`mesh/membership-rules.ts` `beatDue`). */
  controlSentAt?: number;
  lineSentAt?: number;
  /** Datagrams sent to and received from it, as last counted, and when. */
  line?: { sent: number; received: number };
  countedAt?: number;
  /** The connection has closed (it may still be the peer's while its replacement is in its handshake). */
  ended?: boolean;
  /** How it stands with this node, checked at admission and whenever its claim or the roster changes (`peer-standings.ts`). */
  standing: Standing;
  /** The seq of our announcement it holds, as far as we sent it (none: it gets the whole one next). */
  ourSeq?: number;
  /** When we last asked it for its whole announcement, and last answered its ask (one of each a heartbeat). */
  wantedAt?: number;
  answeredAt?: number;
  /** We watch it (`watch-ring.ts`): it gets our beats and the short silence limits. Since when, so a limit counts from then. */
  watched: boolean;
  watchedSince: number;
  /** One of our ring neighbours, as of the last look. */
  neighbour?: boolean;
  /** Its last beat that named us its neighbour. */
  watchedByAt?: number;
  /** A member said it fell silent: since when, and its datagrams received as counted when we probed it. */
  suspect?: { since: number; received: number | undefined };
  /** The `lost` notices from it acted on in the current heartbeat (a bound per member). */
  lostNotices?: { at: number; count: number };
}

/** What one look at the connections found (`PeerTable.readLines`). */
export interface LineLook {
  /** Peers due a beat. */
  due: Peer[];
  /** Suspects that did not answer our probe: gone. */
  unanswered: Peer[];
}

/** The peer takes part in the ring: it announces it, and its connection counts datagrams (`watch-ring.ts`). */
export function inRing(p: Peer): boolean {
  return p.announcement.ring && p.line !== undefined;
}

/** Our beats ask the peer to watch us back: it is our ring neighbour, or a suspect we probe. */
export function asksWatch(p: Peer): boolean {
  return inRing(p) && (p.neighbour === true || p.suspect !== undefined);
}

export class PeerTable extends Map<string, Peer> {
  /** Connections closed as duplicates or reset, and whoever waits for the peer's next one. */
  readonly replacements = new Replacements((id) => this.get(id)?.conn);
  /** Our announcement as last sent to every peer (the heartbeat's): what they know of us, demand included. */
  lastSent: Announcement | undefined;

  /**
   * Whether the peer's connection `old`, on which something just failed, has been replaced: closed
   * as a duplicate (then waiting a while for the one kept), or already by another (`replacements.ts`).
   */
  replacedAfterFailure(peerId: string, old: PeerConnection, o?: { onDuplicate?: () => void; reconnects?: boolean }): Promise<boolean> {
    return this.replacements.afterFailure(peerId, old, o);
  }

  /**
   * Reads the datagram counts (`count`): every look for the peers we watch, every
   * `UNWATCHED_COUNT_MS` for the rest. Works out whom we watch (`watch-ring.ts`: our ring
   * neighbours, those that watch us, suspects, and every peer not in the ring) and returns those
   * due a beat (`beatDue`), so an idle member beats its few neighbours and leaves the rest to
   * QUIC's keep-alives; and the suspects that did not answer our probe.
   */
  readLines(selfId: string, now: number, heartbeatMs: number): LineLook {
    const look: LineLook = { due: [], unanswered: [] };
    for (const peer of this.values()) if (peer.watched || peer.countedAt === undefined || now - peer.countedAt >= UNWATCHED_COUNT_MS) this.count(peer, now);
    const neighbours = ringNeighbours(selfId, [...this.values()].filter(inRing).map((p) => p.id));
    for (const peer of this.values()) {
      peer.neighbour = inRing(peer) && neighbours.has(peer.id);
      const watched = watches({ ringAware: inRing(peer), neighbour: peer.neighbour, watchedByAt: peer.watchedByAt, suspectSince: peer.suspect?.since }, now, heartbeatMs);
      if (watched && !peer.watched) peer.watchedSince = now;
      peer.watched = watched;
      if (peer.suspect && now - peer.suspect.since >= PROBE_MS && peer.line?.received === peer.suspect.received) look.unanswered.push(peer);
      if (watched && beatDue({ beats: peer.announcement.beats, controlAt: peer.controlSentAt ?? 0, lineAt: peer.lineSentAt }, now, heartbeatMs)) {
        look.due.push(peer);
      }
    }
    return look;
  }

  /** The peer's datagram counts, where the transport keeps them: a datagram from it shows it alive, one to it shows it us. */
  private count(peer: Peer, now: number): void {
    const counted = peer.conn.datagrams?.();
    if (!counted) return;
    peer.countedAt = now;
    if (counted.received !== peer.line?.received) peer.lastSeen = now;
    if (counted.sent !== peer.line?.sent) peer.lineSentAt = now;
    peer.line = counted;
  }

  /**
   * The peers gone silent by their limits (`watch-ring.ts`: short for those we watch), and why.
   * One that looks silent is counted again first: after our own event loop stalled, what QUIC
   * received meanwhile still counts, so a stall here drops no peer that stayed alive.
   */
  silent(now: number, peerTimeoutMs: number): { peer: Peer; reason: string }[] {
    const out: { peer: Peer; reason: string }[] = [];
    for (const peer of this.values()) {
      const limits = silenceLimits(peer.watched, peerTimeoutMs, CONTROL_SILENCE_LIMITS);
      if (!silenceVerdict(peer, limits, now)) continue;
      this.count(peer, now);
      const reason = silenceVerdict(peer, limits, now);
      if (reason) out.push({ peer, reason });
    }
    return out;
  }

  /**
   * `from` says it dropped `memberId` for silence: a claim, so we check for ourselves. Returns the
   * member to probe now (any message: its QUIC stack answers within milliseconds when it is
   * alive), watched from now: `readLines` finds it unanswered when no datagram came back within
   * `PROBE_MS`, and a member whose QUIC answers but whose event loop is stuck meets the control
   * limit. A few notices per member and heartbeat are acted on, none about a member in the ring
   * already being checked, and none about the sender itself.
   */
  suspectOnWord(from: Peer, memberId: string, now: number, heartbeatMs: number): Peer | undefined {
    const target = this.get(memberId);
    if (!target || target === from || !inRing(target) || target.suspect) return undefined;
    const window = from.lostNotices && now - from.lostNotices.at < heartbeatMs ? from.lostNotices : { at: now, count: 0 };
    if (window.count >= LOST_NOTICES_PER_HEARTBEAT) return undefined;
    from.lostNotices = { at: window.at, count: window.count + 1 };
    target.suspect = { since: now, received: target.conn.datagrams?.().received };
    if (!target.watched) target.watchedSince = now;
    target.watched = true;
    return target;
  }

  /** A stream of `kind` (its first byte) to a peer; none when it is not a peer now. */
  async openStream(peerId: string, kind: number): Promise<Stream | undefined> {
    const peer = this.get(peerId);
    if (!peer) return undefined;
    const stream = await peer.conn.openStream();
    await stream.send.writeAll(Uint8Array.of(kind));
    return stream;
  }
}
