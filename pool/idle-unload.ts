/**
 * When loaded servers are let go for lack of use: the node's `--idle-unload`, a server's own (a
 * client's `keep_alive`, kept with the server so a reload has the node's again), and the timer that
 * sweeps for them, as often as the shortest limit so far needs. The pool decides what to unload
 * (`idleVictims`) when `sweep` is called.
 */
import { idleLimitMs, sweepPeriodMs } from "./eviction.ts";
import type { WrappedServer } from "./wrapped-server.ts";

export class IdleUnload {
  private timer: Timer | undefined;
  private everyMs = Infinity;
  private stopped = false;
  /** A server's own idle unload, ms, or negative for never. */
  private readonly own = new WeakMap<WrappedServer, number>();

  constructor(
    readonly nodeMs: number,
    private readonly sweep: () => void,
  ) {
    if (nodeMs > 0) this.sweepAtLeastEvery(sweepPeriodMs(nodeMs));
  }

  /** Runs the sweep at least every `periodMs` (a shorter limit than any so far needs a faster sweep). */
  private sweepAtLeastEvery(periodMs: number): void {
    if (this.stopped || periodMs >= this.everyMs) return;
    clearInterval(this.timer);
    this.everyMs = periodMs;
    this.timer = setInterval(this.sweep, periodMs);
    this.timer.unref();
  }

  /** `ms` > 0: unload `server` after that long unused; negative: never; undefined or 0: the node's. */
  set(server: WrappedServer, ms: number | undefined): void {
    if (ms === undefined || ms === 0) this.own.delete(server);
    else this.own.set(server, ms);
    if (ms !== undefined && ms > 0) this.sweepAtLeastEvery(sweepPeriodMs(ms));
  }

  /** The server's own limit, if it has one. */
  ownOf(server: WrappedServer): number | undefined {
    return this.own.get(server);
  }

  /** How long a server may sit unused before it is unloaded (0: never). */
  limitOf(server: WrappedServer | undefined): number {
    return idleLimitMs(server ? this.own.get(server) : undefined, this.nodeMs);
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
  }
}
