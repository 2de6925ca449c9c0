/**
 * Members to dial, paced: at most a few dials at once, and a member heard of in passing (another
 * member's `members` message) only after a pause, since the newcomer it names dials every member
 * it was told of itself. Without it a node joining a mesh of 50 dials 49 members at once while 48
 * of them dial it back: two handshakes for every pair, and half of them closed as duplicates.
 */
import type { Log } from "../base/log.ts";
import { shortId } from "../base/short-id.ts";
import type { MemberAddr } from "./join-token.ts";

/** Dials under way at once, at most. */
export const DIALS_AT_ONCE = 8;
/** How long a member heard of counts as news the mesh already has (`admitted`), and how many are kept (the oldest go first). */
const HEARD_FOR_MS = 60_000;
const HEARD_KEPT = 1_024;
const ROOM_CHECK_MS = 250;
/**
 * How long a member heard of in passing is left to dial us first (pure): of two members that each
 * heard of the other, the one with the smaller id dials first, the other only if that failed, so a
 * pair that joined at once meets with one handshake.
 */
export function passingDelayMs(selfId: string, peerId: string): number {
  return selfId < peerId ? 3_000 : 6_000;
}

/** The waiting members to dial now (pure): those due, not connected or dialed, the soonest first, up to the room left. */
export function dialsToStart(waiting: ReadonlyMap<string, number>, now: number, room: number, busy: (id: string) => boolean): string[] {
  return [...waiting]
    .filter(([id, at]) => at <= now && !busy(id))
    .sort((a, b) => a[1] - b[1])
    .slice(0, Math.max(0, room))
    .map(([id]) => id);
}

export interface DialQueueParts {
  selfId: string;
  dial(addr: MemberAddr): Promise<void>;
  /** A peer now, or a dial to it under way. */
  busy(id: string): boolean;
  /** Dials under way now (this queue's and any other). */
  dialing(): number;
  stopped(): boolean;
  log: Log;
}

export class DialQueue {
  private readonly waiting = new Map<string, { addr: MemberAddr; at: number }>();
  /** Members heard of lately, in passing or admitted, and when. */
  private readonly heard = new Map<string, number>();
  private timer: Timer | undefined;

  constructor(private readonly o: DialQueueParts) {}

  /** Members a new peer's hello named: dialed now, a few at a time. */
  now(addrs: readonly MemberAddr[]): void {
    this.add(addrs, () => 0);
  }

  /** Members heard of in passing: dialed after their pause, if they have not dialed us by then. */
  passing(addrs: readonly MemberAddr[]): void {
    for (const addr of addrs) this.note(addr.nodeId);
    this.add(addrs, (id) => passingDelayMs(this.o.selfId, id));
  }

  /**
   * A member was admitted: whether it is news to this node, which then tells its other peers of it
   * (a member heard of in the last minute was told to them by whoever admitted it first, so a
   * newcomer's name goes around the mesh about once, where every admission sent it to everyone).
   */
  admitted(id: string): boolean {
    const at = this.heard.get(id);
    this.note(id);
    return at === undefined || Date.now() - at > HEARD_FOR_MS;
  }

  private note(id: string): void {
    this.heard.delete(id);
    this.heard.set(id, Date.now());
    if (this.heard.size > HEARD_KEPT) this.heard.delete(this.heard.keys().next().value!);
  }

  private add(addrs: readonly MemberAddr[], delay: (id: string) => number): void {
    const now = Date.now();
    for (const addr of addrs) {
      if (addr.nodeId === this.o.selfId || this.o.busy(addr.nodeId)) continue;
      const at = now + delay(addr.nodeId);
      const held = this.waiting.get(addr.nodeId);
      if (!held || at < held.at) this.waiting.set(addr.nodeId, { addr, at });
    }
    this.pump();
  }

  /** Starts what is due and there is room for, and wakes again for the next one. */
  private pump(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.o.stopped()) return void this.waiting.clear();
    const now = Date.now();
    for (const [id] of [...this.waiting].filter(([id]) => this.o.busy(id))) this.waiting.delete(id);
    const at = new Map([...this.waiting].map(([id, w]) => [id, w.at]));
    for (const id of dialsToStart(at, now, DIALS_AT_ONCE - this.o.dialing(), this.o.busy)) {
      const { addr } = this.waiting.get(id)!;
      this.waiting.delete(id);
      this.o
        .dial(addr)
        .catch((err: unknown) => this.o.log.warn("could not reach a member", { peer: shortId(id), error: (err as Error).message }))
        .finally(() => this.pump());
    }
    if (this.waiting.size === 0) return;
    // Wake for the next one due; one due already waits for room (dials of others' finish unseen here).
    const next = Math.min(...[...this.waiting.values()].map((w) => w.at));
    this.timer = setTimeout(() => this.pump(), Math.max(next - now, ROOM_CHECK_MS)).unref();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.waiting.clear();
  }
}
