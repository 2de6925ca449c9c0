/**
 * The RPC sessions members hold into this node's `rpc-server`, over either path (QUIC streams, the
 * direct TLS port). `rpc-server` serves one client at a time, so a session that never gets to work
 * keeps every host waiting: each must allocate a buffer within RPC_SETUP_MS of opening (a host's
 * llama-server does within a second or so of its HELLO), and one member holds at most
 * MAX_RPC_SESSIONS_PER_PEER at once (a host keeps one per worker, two across a reload), however
 * many connections it proves.
 */

export const MAX_RPC_SESSIONS_PER_PEER = 4;
export const RPC_SETUP_MS = 30_000;

export class RpcSessions {
  private readonly open = new Map<string, number>();

  constructor(
    private readonly perPeer = MAX_RPC_SESSIONS_PER_PEER,
    private readonly setupMs = RPC_SETUP_MS,
  ) {}

  /** Sessions open now from `peerId`. */
  of(peerId: string): number {
    return this.open.get(peerId) ?? 0;
  }

  /**
   * A place for one more session from `peerId`, or undefined when it holds its share. `close` is
   * called when the session has not allocated a buffer (`allocated`) by the setup deadline;
   * `release` gives the place back (once).
   */
  take(peerId: string, allocated: () => boolean, close: () => void): { release: () => void } | undefined {
    const mine = this.of(peerId);
    if (mine >= this.perPeer) return undefined;
    this.open.set(peerId, mine + 1);
    const deadline = setTimeout(() => allocated() || close(), this.setupMs);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        clearTimeout(deadline);
        const left = this.of(peerId) - 1;
        if (left > 0) this.open.set(peerId, left);
        else this.open.delete(peerId);
      },
    };
  }
}
