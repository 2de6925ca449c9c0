/**
 * The members this node holds now, each with its connection, control stream, announcement and
 * standing. The membership admits and drops them; the node's parts are built with the table before
 * the membership exists, and read it (and open streams to its peers) from then on.
 */
import type { Announcement } from "./messages.ts";
import type { Standing } from "./peer-standings.ts";
import { Replacements } from "./replacements.ts";
import type { PeerConnection, Stream } from "./transport.ts";

export interface Peer {
  id: string;
  conn: PeerConnection;
  control: Stream;
  dialer: string;
  announcement: Announcement;
  lastSeen: number;
  /** The connection has closed (it may still be the peer's while its replacement is in its handshake). */
  ended?: boolean;
  /** How it stands with this node, checked at admission and whenever its claim or the roster changes (`peer-standings.ts`). */
  standing: Standing;
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

  /** A stream of `kind` (its first byte) to a peer; none when it is not a peer now. */
  async openStream(peerId: string, kind: number): Promise<Stream | undefined> {
    const peer = this.get(peerId);
    if (!peer) return undefined;
    const stream = await peer.conn.openStream();
    await stream.send.writeAll(Uint8Array.of(kind));
    return stream;
  }
}
