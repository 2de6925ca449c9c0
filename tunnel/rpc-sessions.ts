/**
 * The RPC sessions members hold into this node's `rpc-server`, over either path (QUIC streams, the
 * direct TLS port). `rpc-server` serves one client at a time, so a session that never gets to work
 * keeps every host waiting: once `rpc-server` serves it (its first answer), it must allocate a
 * buffer within RPC_SETUP_MS (a host's llama-server does within a second or so of its HELLO); a
 * session still queued behind another is not on that clock. One member holds at most
 * MAX_RPC_SESSIONS_PER_PEER at once (a host keeps one per worker, two across a reload), however
 * many connections it proves.
 */
import { KeyCounts } from "../base/key-counts.ts";

export const MAX_RPC_SESSIONS_PER_PEER = 4;
export const RPC_SETUP_MS = 30_000;

export interface RpcSession {
  /** `rpc-server` answers it now: its setup time runs from here. */
  served: () => void;
  /** Gives the place back (once), and stops its clock. */
  release: () => void;
}

export class RpcSessions {
  private readonly open = new KeyCounts();

  constructor(
    private readonly perPeer = MAX_RPC_SESSIONS_PER_PEER,
    private readonly setupMs = RPC_SETUP_MS,
  ) {}

  /** Sessions open now from `peerId`. */
  of(peerId: string): number {
    return this.open.of(peerId);
  }

  /**
   * A place for one more session from `peerId`, or undefined when it holds its share. `close` is
   * called when the session has not allocated a buffer (`allocated`) by its setup deadline.
   */
  take(peerId: string, allocated: () => boolean, close: () => void): RpcSession | undefined {
    if (this.of(peerId) >= this.perPeer) return undefined;
    this.open.add(peerId);
    let deadline: Timer | undefined;
    let released = false;
    return {
      served: () => {
        if (released || deadline) return;
        deadline = setTimeout(() => allocated() || close(), this.setupMs);
      },
      release: () => {
        if (released) return;
        released = true;
        clearTimeout(deadline);
        this.open.remove(peerId);
      },
    };
  }
}
