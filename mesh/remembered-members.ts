/**
 * The members a node has known, to find its mesh (or the part of it it lost) again: their addresses,
 * the most recently seen last and at most `max` of them, and which of them said goodbye. One that
 * left on purpose is dialed only when we are alone (a node restarted on purpose, an upgrade or
 * `systemctl restart`, comes back where it was, and a founder has no token to find its members
 * with), and is forgotten once it has been gone `forgetAfterMs`.
 */
import type { MemberAddr } from "./join-token.ts";
import type { Announcement } from "./messages.ts";

/** Where a member says it can be dialed: a claim, checked by the node id QUIC's handshake proves. */
export function memberAddr(a: Announcement): MemberAddr {
  return { nodeId: a.nodeId, addresses: a.addresses, ...(a.relayUrl ? { relayUrl: a.relayUrl } : {}) };
}

export class RememberedMembers {
  private readonly addrs = new Map<string, MemberAddr>();
  private readonly leftAt = new Map<string, number>();

  constructor(
    private readonly max: number,
    private readonly forgetAfterMs: number,
  ) {}

  get size(): number {
    return this.addrs.size;
  }

  get(id: string): MemberAddr | undefined {
    return this.addrs.get(id);
  }

  ids(): IterableIterator<string> {
    return this.addrs.keys();
  }

  /** Every address, the oldest first. */
  all(): MemberAddr[] {
    return [...this.addrs.values()];
  }

  /** The most recently seen first, at most `max`. */
  recent(max: number): MemberAddr[] {
    return this.all().reverse().slice(0, max);
  }

  /** Those that said goodbye (not to be dialed while we have other peers). */
  left(): IterableIterator<string> {
    return this.leftAt.keys();
  }

  /** Seen now (it is back, if it had left); the oldest goes when there are too many. */
  seen(addr: MemberAddr): void {
    this.addrs.delete(addr.nodeId);
    this.addrs.set(addr.nodeId, addr);
    this.leftAt.delete(addr.nodeId);
    if (this.addrs.size > this.max) this.forget(this.addrs.keys().next().value!);
  }

  /** It said goodbye. */
  leftOnPurpose(id: string, now: number): void {
    if (this.addrs.has(id)) this.leftAt.set(id, now);
  }

  /** Whether it left on purpose so long ago that it has gone for good (it is forgotten then). */
  goneForGood(id: string, now: number): boolean {
    const left = this.leftAt.get(id);
    if (left === undefined || now - left <= this.forgetAfterMs) return false;
    this.forget(id);
    return true;
  }

  forget(id: string): void {
    this.addrs.delete(id);
    this.leftAt.delete(id);
  }
}
