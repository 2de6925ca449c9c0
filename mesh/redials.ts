/**
 * Finding members again: the members this node has known (each one authenticated once), the
 * rejoin while it has no peer at all (every one of them, round after round with backoff: a network
 * blip or a restart of the others must not leave it alone for good), and, while it keeps others,
 * members it lost, each dialed again on its own growing pause (`dueRedials`) until gone too long.
 */
import type { Log } from "../base/log.ts";
import { shortId } from "../base/short-id.ts";
import type { MemberAddr } from "./join-token.ts";
import { dueRedials, joinBackoffMs } from "./membership-rules.ts";
import { RememberedMembers } from "./remembered-members.ts";

/** Members remembered to find the mesh again: the most recent ones. */
export const REMEMBER_MAX = 1_024;
/** A lost member is dialed again, on a growing pause, for this long. */
const FORGET_LOST_AFTER_MS = 6 * 3_600_000;

export interface RedialParts {
  /** Dials a member and runs the handshake; rejects when it fails. */
  dial(addr: MemberAddr): Promise<void>;
  /** Whether this node has no peer now. */
  alone(): boolean;
  stopped(): boolean;
  /** Ids not to dial now: peers, dials under way, this node. */
  busy(): Iterable<string>;
  log: Log;
}

export class Redials {
  readonly remembered = new RememberedMembers(REMEMBER_MAX, FORGET_LOST_AFTER_MS);
  /** Remembered members we lost: how often dialing them failed, and when to try next. */
  private readonly lost = new Map<string, { attempt: number; at: number; since: number }>();
  private rejoining = false;

  constructor(private readonly o: RedialParts) {}

  /** A member is connected: it is remembered, and no longer lost. */
  connected(addr: MemberAddr): void {
    this.remembered.seen(addr);
    this.lost.delete(addr.nodeId);
  }

  /** A member not to find again: it sent junk, or the roster refuses it. */
  forget(id: string): void {
    this.remembered.forget(id);
    this.lost.delete(id);
  }

  /** A member that said it leaves: dialed again only while this node is alone. */
  left(id: string, now = Date.now()): void {
    this.lost.delete(id);
    this.remembered.leftOnPurpose(id, now);
  }

  /** While this node has no peer, dials every member it has known (the join token's first), round after round. */
  async rejoin(): Promise<void> {
    if (this.rejoining) return;
    this.rejoining = true;
    try {
      for (let attempt = 0; !this.o.stopped() && this.o.alone() && this.remembered.size > 0; attempt++) {
        for (const addr of this.remembered.all()) {
          if (this.remembered.goneForGood(addr.nodeId, Date.now())) continue;
          try {
            await this.o.dial(addr);
            return;
          } catch (err) {
            this.o.log.warn("could not join the mesh; retrying", { via: shortId(addr.nodeId), error: (err as Error).message });
          }
        }
        await Bun.sleep(joinBackoffMs(attempt));
      }
    } finally {
      this.rejoining = false;
    }
  }

  /** Dials members we lost while keeping others, each on its own growing pause. */
  due(now: number): void {
    if (this.o.stopped()) return;
    const busy = new Set([...this.o.busy(), ...this.remembered.left()]);
    for (const id of dueRedials(this.remembered.ids(), busy, new Map([...this.lost].map(([k, v]) => [k, v.at])), now)) this.redial(id, now);
  }

  /**
   * A member whose connection just ended is dialed again at once, not on the next tick: a live one
   * (its endpoint reset a connection it had lost) is back before a request waiting on it gives up.
   */
  lostNow(id: string, now = Date.now()): void {
    if (this.o.stopped() || !this.remembered.get(id) || new Set(this.o.busy()).has(id)) return;
    this.redial(id, now);
  }

  private redial(id: string, now: number): void {
    const addr = this.remembered.get(id)!;
    const lost = this.lost.get(id);
    // A member gone this long has left for good (or moved): it is not dialed for ever.
    if (lost && now - lost.since > FORGET_LOST_AFTER_MS) return this.forget(id);
    const attempt = (lost?.attempt ?? -1) + 1;
    this.lost.set(id, { attempt, at: now + joinBackoffMs(attempt), since: lost?.since ?? now });
    // Failures are expected while the member is unreachable: the pause grows, nothing to log each time.
    this.o.dial(addr).catch(() => undefined);
  }
}
