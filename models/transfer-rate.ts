/**
 * How fast a transfer moves: a meter over its bytes and the rates measured so far per source. A
 * transfer's first moments say little (a connection's slow start, a redirect, a resumed file's
 * first answer), so its window opens after a warm-up and is full only after enough time and enough
 * bytes that one burst or one pause does not decide; a source that moves almost nothing is judged
 * after a while on what it did move. A rate is remembered for a while, not for ever: links change.
 */

export interface RateWindow {
  /** From the first byte, this long passes before the window opens. */
  warmupMs: number;
  /** The window is full once it spans at least this long... */
  minMs: number;
  /** ...and holds at least this many bytes. */
  minBytes: number;
  /** From its start (`begin`, or the first byte), a meter is judged after this long on what moved by then. */
  maxMs: number;
}

/** A model copy's window: long enough to see past QUIC's and TCP's ramp, short beside a model's transfer. */
export const COPY_RATE_WINDOW: RateWindow = { warmupMs: 500, minMs: 2_000, minBytes: 8 * 2 ** 20, maxMs: 20_000 };

/** A measured rate is trusted this long. */
export const RATE_TTL_MS = 15 * 60_000;
/** Sources remembered at most (a mesh's members and the hosts its models come from). */
const MAX_SOURCES = 256;

export class RateMeter {
  /** Bytes per second, once the window is full or `maxMs` has passed; never rejects. */
  readonly full: Promise<number>;
  private settle: (rate: number) => void = () => undefined;
  private settled = false;
  private began: number | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private firstAt: number | undefined;
  private windowAt: number | undefined;
  private windowBytes = 0;
  private total = 0;
  private lastReported: number | undefined;

  constructor(
    private readonly w: RateWindow,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.full = new Promise((resolve) => (this.settle = resolve));
  }

  /** Starts the clock before any byte: a source that takes long to send its first one is slow. */
  begin(): void {
    if (this.began !== undefined || this.settled) return;
    this.began = this.now();
    // A source this slow had its chance, warm-up and all: judged on everything it moved.
    this.timer = setTimeout(() => this.judge(this.overAll(this.now())), this.w.maxMs);
  }

  /** `n` more bytes arrived. */
  add(n: number): void {
    if (this.settled) return;
    this.begin();
    const t = this.now();
    this.total += n;
    this.firstAt ??= t;
    if (this.windowAt === undefined) {
      if (t - this.firstAt < this.w.warmupMs) return;
      this.windowAt = t;
      this.windowBytes = this.total;
      return;
    }
    if (t - this.windowAt >= this.w.minMs && this.total - this.windowBytes >= this.w.minBytes) this.judge(perSecond(this.total - this.windowBytes, t - this.windowAt));
  }

  /**
   * The transfer's progress reached `bytes` (counting what was there before it began). The first
   * report only sets where it starts: a resumed file's bytes did not move now.
   */
  progressTo(bytes: number): void {
    const last = this.lastReported;
    this.lastReported = bytes;
    // A restart from zero, too, is a new start, not bytes that moved.
    this.add(last === undefined || bytes < last ? 0 : bytes - last);
  }

  /** Measures from here afresh (the transfer changed path, say), warm-up and all. */
  restart(): void {
    if (this.settled) return;
    this.firstAt = undefined;
    this.windowAt = undefined;
    this.total = 0;
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.began = undefined;
      this.begin();
    }
  }

  /**
   * The rate of a transfer that has ended: over its window, or over all of it when it ended within
   * the warm-up; undefined when it moved too few bytes to say.
   */
  final(): number | undefined {
    const t = this.now();
    if (this.windowAt !== undefined && this.total - this.windowBytes >= this.w.minBytes) return perSecond(this.total - this.windowBytes, t - this.windowAt);
    if (this.firstAt !== undefined && this.total >= this.w.minBytes) return perSecond(this.total, t - this.firstAt);
    return undefined;
  }

  /** Stops the clock; `full` then resolves only if it already has. */
  stop(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private overAll(t: number): number {
    return this.began !== undefined && t > this.began ? perSecond(this.total, t - this.began) : 0;
  }

  private judge(rate: number): void {
    if (this.settled) return;
    this.settled = true;
    this.stop();
    this.settle(rate);
  }
}

function perSecond(bytes: number, ms: number): number {
  return (bytes * 1000) / Math.max(1, ms);
}

/** The last rate measured per source (a peer's id, a host), for `RATE_TTL_MS`. */
export class MeasuredRates {
  private readonly rates = new Map<string, { rate: number; at: number }>();

  constructor(
    private readonly ttlMs = RATE_TTL_MS,
    private readonly now: () => number = Date.now,
  ) {}

  get(source: string): number | undefined {
    const r = this.rates.get(source);
    if (!r) return undefined;
    if (this.now() - r.at <= this.ttlMs) return r.rate;
    this.rates.delete(source);
    return undefined;
  }

  set(source: string, rate: number): void {
    this.rates.delete(source);
    this.rates.set(source, { rate, at: this.now() });
    // The map keeps its insertion order: the first one is the oldest.
    if (this.rates.size > MAX_SOURCES) this.rates.delete(this.rates.keys().next().value!);
  }
}
