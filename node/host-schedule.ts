/**
 * When a host (re)loads its model, as state over an injected clock (the shell owns the timer):
 * joins and leaves come in bursts, so a load over peers waits until the group's layout has been
 * quiet for a while, and loads that failed over one layout space the next try further each time,
 * so a broken file does not spin llama-server while a passing fault still gets another chance.
 */
import { workerIds } from "../placement/election.ts";
import { hidePaths } from "../mesh/member-text.ts";

/** A load over peers starts once the layout it is for has not changed for this long... */
export const SETTLE_QUIET_MS = 2_000;
/** ...but a group that never stops changing is not left waiting for ever. */
export const SETTLE_MAX_MS = 10_000;

/** The wait after `failures` failed loads in a row: 10 s, doubling, at most 5 min. */
export const retryAfterFailureMs = (failures: number): number => Math.min(300_000, 10_000 * 2 ** Math.max(0, Math.min(failures, 16) - 1));

/** Characters of a failed load's error that peers are told. */
const FAILURE_TEXT = 300;


export interface LoadFailure {
  model: string;
  /** The workers (comma-joined node ids) the failed load ran over. */
  workers: string | undefined;
  error: string;
  /** Failed loads in a row over that layout. */
  count: number;
  at: number;
}

export class HostSchedule {
  /** The layout a pending (re)load is for, and when its group first changed. */
  private settling: { workers: string | undefined; since: number } | undefined;
  private failure: LoadFailure | undefined;

  constructor(private readonly now: () => number = Date.now) {}

  /**
   * The layout wanted now. A failure over workers of which one has gone since (a worker died
   * mid-load) says nothing of a load over the members left: it is forgotten. A member joining
   * changes nothing: the same broken file would fail again.
   */
  layoutIs(model: string, wanted: string | undefined): void {
    const f = this.failure;
    if (f?.model === model && workerIds(f.workers).some((id) => !workerIds(wanted).includes(id))) this.failure = undefined;
  }

  /**
   * Milliseconds until the (re)load over `wanted` should start; undefined while a wait already
   * pending (`pending`) is for that same layout. `settle`: a load over peers, or a reload.
   */
  delay(wanted: string | undefined, settle: boolean, pending: boolean): number | undefined {
    if (pending && this.settling?.workers === wanted) return undefined;
    const now = this.now();
    const since = this.settling?.since ?? now;
    this.settling = { workers: wanted, since };
    const backoff = this.failure ? this.failure.at + retryAfterFailureMs(this.failure.count) - now : 0;
    if (backoff > 0) return backoff;
    return settle ? Math.max(0, Math.min(SETTLE_QUIET_MS, SETTLE_MAX_MS - (now - since))) : 0;
  }

  /** Nothing is to be loaded (any more): the next change starts a new wait. */
  cancel(): void {
    this.settling = undefined;
  }

  /** The model or the host changed: what was learned of the old one no longer applies. */
  reset(): void {
    this.settling = undefined;
    this.failure = undefined;
  }

  loaded(model: string): void {
    if (this.failure?.model === model) this.failure = undefined;
  }

  /** Records a failed load and returns how long until the next try. */
  failed(model: string, workers: string | undefined, error: Error): number {
    const f = this.failure;
    const count = f?.model === model && f.workers === workers ? f.count + 1 : 1;
    // Announced to every member: the file's name, not where this node keeps it.
    this.failure = { model, workers, error: hidePaths(error.message.split("\n")[0]!).slice(0, FAILURE_TEXT), count, at: this.now() };
    return retryAfterFailureMs(count);
  }

  /** What peers are told of the model's failed load while it is not served. */
  announced(model: string | undefined, serving: readonly string[]): { model: string; error: string; retryInS: number } | undefined {
    const f = this.failure;
    if (!f || f.model !== model || serving.includes(f.model)) return undefined;
    return { model: f.model, error: f.error, retryInS: Math.ceil(retryAfterFailureMs(f.count) / 1000) };
  }
}
