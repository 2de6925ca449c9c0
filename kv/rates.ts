/**
 * Rates measured as they come (a prompt read, a fetch, a restore), per key, as a moving average
 * that gives the newest a fifth: one slow request does not decide, a changed link shows within a
 * few. Bounded in keys (models, members) and forgotten after a while: links and loads change.
 */
const WEIGHT = 0.2;
const MAX_KEYS = 256;
export const RATE_TTL_MS = 30 * 60_000;

export class Rates {
  private readonly m = new Map<string, { rate: number; at: number }>();
  constructor(private readonly now: () => number = Date.now) {}

  add(key: string, amount: number, ms: number): void {
    if (!(amount > 0) || !(ms > 0)) return;
    const rate = (amount / ms) * 1000;
    const old = this.get(key);
    this.m.delete(key);
    this.m.set(key, { rate: old === undefined ? rate : old * (1 - WEIGHT) + rate * WEIGHT, at: this.now() });
    if (this.m.size > MAX_KEYS) this.m.delete(this.m.keys().next().value!);
  }

  /** Per second, or none when not measured lately. */
  get(key: string): number | undefined {
    const e = this.m.get(key);
    if (!e) return undefined;
    if (this.now() - e.at > RATE_TTL_MS) {
      this.m.delete(key);
      return undefined;
    }
    return e.rate;
  }
}
