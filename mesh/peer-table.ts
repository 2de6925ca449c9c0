/**
 * The members this node holds now, each with its connection, control stream, announcement and
 * standing. The membership admits and drops them; the node's parts are built with the table before
 * the membership exists, and read it (and open streams to its peers) from then on.
 */
import type { Announcement } from "./messages.ts";
import type { Standing } from "./peer-standings.ts";
import { beatDue } from "./membership-rules.ts";
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
  /** Datagrams sent to and received from it, as last counted. */
  line?: { sent: number; received: number };
  /** The connection has closed (it may still be the peer's while its replacement is in its handshake). */
  ended?: boolean;
  /** How it stands with this node, checked at admission and whenever its claim or the roster changes (`peer-standings.ts`). */
  standing: Standing;
  /** The seq of our announcement it holds, as far as we sent it (none: it gets the whole one next). */
  ourSeq?: number;
  /** When we last asked it for its whole announcement, and last answered its ask (one of each a heartbeat). */
  wantedAt?: number;
  answeredAt?: number;
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
   * Reads each connection's datagram counts (where the transport keeps them): a datagram from a
   * peer shows it alive, one to it shows it us. Returns the peers due a beat (`beatDue`): so an
   * idle pair exchanges about one message a heartbeat between them, often none (QUIC's own packets
   * say enough), where each sent one before.
   */
  readLines(now: number, heartbeatMs: number): Peer[] {
    const due: Peer[] = [];
    for (const peer of this.values()) {
      const counted = peer.conn.datagrams?.();
      if (counted) {
        if (counted.received !== peer.line?.received) peer.lastSeen = now;
        if (counted.sent !== peer.line?.sent) peer.lineSentAt = now;
        peer.line = counted;
      }
      if (beatDue({ beats: peer.announcement.beats, controlAt: peer.controlSentAt ?? 0, lineAt: peer.lineSentAt }, now, heartbeatMs)) due.push(peer);
    }
    return due;
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
