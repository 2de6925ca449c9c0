/**
 * Two members that dial each other at once keep one connection and close the other as a duplicate
 * (`keepWhich`). The side that closes it may be ahead of the other: there, the connection kept is
 * still in its handshake when the duplicate's close arrives. A stream that failed on the duplicate
 * is then not the member's failure: whoever used it waits a moment for the connection kept, and
 * the member stays (views, routes and groups unchanged).
 */
import type { PeerConnection } from "./transport.ts";

/** The reason a connection closed as a duplicate carries, as either side's `closed` reports it. */
export const DUPLICATE_REASON = "duplicate connection";
export const closedAsDuplicate = (reason: string): boolean => reason.includes(DUPLICATE_REASON);
/**
 * Whether a connection ended by a stateless reset: the peer's endpoint is alive but no longer knows
 * the connection (its close was lost, say), so the member is dialed again at once (`redials.ts`).
 * iroh 1.x says "reset by peer"; 0.35 wraps the same quinn error as "ConnectionLost(Reset)".
 */
export const resetByPeer = (reason: string): boolean => /reset by peer|\bReset\b/.test(reason);

/** How long a connection on which a stream just failed takes to report why it closed. */
const CLOSE_REASON_MS = 250;
/** How long a member whose connection closed as a duplicate waits for the one kept to finish its handshake here. */
const REPLACEMENT_MS = 5_000;

export class Replacements {
  /** Whoever waits for a peer's connection to be replaced: told at each admission. */
  private readonly waiters = new Set<() => void>();

  /** `connOf`: the connection a peer has now, if it is one. */
  constructor(private readonly connOf: (peerId: string) => PeerConnection | undefined) {}

  /** A peer was admitted (on a new connection, perhaps the one kept). */
  admitted(): void {
    for (const told of [...this.waiters]) told();
  }

  /**
   * Whether the peer's connection `old`, on which something just failed, has been replaced: closed
   * as a duplicate (then waiting up to REPLACEMENT_MS for the one kept), or already by another.
   * `reconnects`: a connection the peer reset is waited for too (the member is dialed again at
   * once); the membership itself does not wait for that, it drops the peer so the dial can start.
   */
  async afterFailure(peerId: string, old: PeerConnection, o: { onDuplicate?: () => void; reconnects?: boolean } = {}): Promise<boolean> {
    const reason = await Promise.race([old.closed, Bun.sleep(CLOSE_REASON_MS).then(() => "")]);
    if (closedAsDuplicate(reason)) {
      o.onDuplicate?.();
      return this.replaced(peerId, old, REPLACEMENT_MS);
    }
    if (o.reconnects && resetByPeer(reason)) return this.replaced(peerId, old, REPLACEMENT_MS);
    return this.isReplaced(peerId, old);
  }

  private isReplaced(peerId: string, old: PeerConnection): boolean {
    const conn = this.connOf(peerId);
    return conn !== undefined && conn !== old;
  }

  /** Waits up to `timeoutMs` for the peer to be connected by another connection than `old`. */
  private replaced(peerId: string, old: PeerConnection, timeoutMs: number): Promise<boolean> {
    if (this.isReplaced(peerId, old)) return Promise.resolve(true);
    return new Promise((resolve) => {
      const finish = (ok: boolean) => {
        clearTimeout(timer);
        this.waiters.delete(check);
        resolve(ok);
      };
      const check = () => this.isReplaced(peerId, old) && finish(true);
      const timer = setTimeout(() => finish(false), timeoutMs);
      this.waiters.add(check);
    });
  }
}
