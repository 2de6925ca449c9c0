/**
 * The queue in front of one llama-server's slots. A request takes a slot at once while one is
 * free; otherwise it waits, and a released slot goes straight to the next waiter (no polling).
 * Waiters are served round-robin between their sources (the member that forwarded the request,
 * the API key, or "local"), first come first served within a source, so one busy client cannot
 * starve the others. The queue is bounded: beyond `maxQueue` waiters a request is refused with
 * `ModelQueueFull` (429 and a Retry-After worked out from recent service times), and the bound is
 * shared fairly: a full queue takes a request from a source with fewer waiters than the source
 * with the most, whose newest waiter is refused in its place (one key's long requests cannot
 * keep every other key out, while a lone client still has the whole queue). A waiter whose
 * client goes away leaves at once. Its figures (slots, in flight, queued, the longest recent wait)
 * are what `/metrics` and the node's announcements carry: the demand signal for replicas.
 *
 * A request admitted with `admit` may be sent to the server ahead of its slot, one per slot at
 * most (`readyPerSlot`): llama-server queues it and starts it the moment a slot frees, where a slot
 * handed over only on release would idle for the answer's way back and the next request's way in.
 * Such a request is still counted as waiting (`queued`, the bound, its source's share) until a
 * release gives it the slot, and it keeps its place in the round: requests go ahead in the order
 * their turns come. One sent ahead whose answer has not begun may still be displaced by the fair
 * share (its `revoked` signal aborts its request with the refusal).
 */
import { PoolError } from "./errors.ts";

/** What a queue tells about itself: the demand on its model's server. */
export interface QueueFigures {
  slots: number;
  inFlight: number;
  queued: number;
  /** The longest wait among requests that got their slot within the last `WAIT_WINDOW_MS`; 0 when none. */
  waitMs: number;
}

/** Told of every wait that ended with a slot, and every request refused for a full queue (the metrics). */
export interface QueueObserver {
  waited(model: string, ms: number): void;
  rejected(model: string): void;
}

/** Passes what every queue saw on to whoever watches them all (the metrics). */
export class QueueObservers implements QueueObserver {
  private readonly observers = new Set<QueueObserver>();
  add(observer: QueueObserver): void {
    this.observers.add(observer);
  }
  waited(model: string, ms: number): void {
    for (const o of this.observers) o.waited(model, ms);
  }
  rejected(model: string): void {
    for (const o of this.observers) o.rejected(model);
  }
}

export const WAIT_WINDOW_MS = 10_000;
/** Requests that may wait for a model's slot unless told otherwise (`--max-queue`). */
export const DEFAULT_MAX_QUEUE = 64;
/** llama-server's slots when neither `/props` nor its argv tells (its own default for `--parallel`). */
export const DEFAULT_SLOTS = 4;
/** A Retry-After longer than this is no help to a client: most retry on their own schedule beyond a minute. */
const MAX_RETRY_AFTER_S = 60;
/** Weight of the newest service time in the running average Retry-After is worked out from. */
const SERVICE_EWMA = 0.2;

/** The queue of a model's server is full: 429, and when to try again. */
export class ModelQueueFull extends PoolError {
  constructor(message: string, retryAfterS: number) {
    super(message, 429, "rate_limit_error", "model_queue_full", retryAfterS);
  }
}

/**
 * The slots a llama-server started with `argv` has, from its last `--parallel`/`-np` (pure), or
 * undefined when it names none or an auto value.
 */
export function slotsFromArgv(argv: readonly string[]): number | undefined {
  let slots: number | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const [flag, inline] = a.startsWith("--parallel=") ? ["--parallel", a.slice("--parallel=".length)] : [a, undefined];
    if (flag !== "--parallel" && flag !== "-np") continue;
    const text = inline ?? argv[i + 1];
    const n = Number(text);
    if (text !== undefined && /^\d+$/.test(text) && n >= 1) slots = Math.min(n, 4096);
  }
  return slots;
}

/** `total_slots` from a `/props` answer (pure), or undefined when it has none that makes sense. */
export function slotsFromProps(props: unknown): number | undefined {
  const n = (props as { total_slots?: unknown } | null)?.total_slots;
  return typeof n === "number" && Number.isInteger(n) && n >= 1 && n <= 4096 ? n : undefined;
}

/**
 * Seconds a refused client should wait (pure): about the time the requests ahead of it need, given
 * the recent mean service time per slot; at least 1, at most a minute.
 */
export function retryAfterSeconds(queued: number, slots: number, meanServiceMs: number): number {
  const ms = (Math.max(1, queued) / Math.max(1, slots)) * meanServiceMs;
  return Math.min(MAX_RETRY_AFTER_S, Math.max(1, Math.ceil(ms / 1000)));
}

interface Waiter {
  source: string;
  since: number;
  grant: () => void;
  fail: (err: unknown) => void;
  /** An `admit` caller's: it is sent to the server ahead of its slot (told with its release). */
  ahead?: () => void;
  /** Sent ahead: its answer began (the server runs it); no longer to be displaced. */
  begun?: boolean;
  /** Sent ahead: aborts its request with a refusal, when the fair share displaces it. */
  revoke?: AbortController;
}

/** A request's hold on the queue from `admit`. */
export interface Admission {
  /** Gives the slot (or the place ahead of one) back; once, however often called. */
  release: () => void;
  /** Sent ahead of its slot: aborted with the refusal should the fair share displace it before its answer begins. */
  revoked?: AbortSignal;
  /** Its answer began: the server runs it, so it is displaced no more. */
  begun: () => void;
}

/** Requests sent to a server ahead of its slots, per slot: each is started by the server as a slot frees. */
export const READY_PER_SLOT = 1;

/**
 * The HTTP threads a llama-server with `slots` needs (pure): one per request it holds, those sent
 * ahead of a slot included, and two more, so that requests that take no slot (`/tokenize`, its
 * `/health`) still find one free, as with llama-server's own default (slots + 2, or the cores but
 * one when more), which never counted requests sent ahead.
 */
export function httpThreadsFor(slots: number, cores: number, readyPerSlot = READY_PER_SLOT): number {
  return Math.max(slots * (1 + readyPerSlot) + 2, cores - 1);
}

export interface SlotQueueOptions {
  model: string;
  slots: number;
  maxQueue: number;
  now?: () => number;
  observer?: QueueObserver;
  /** Requests `admit` sends ahead of a slot, per slot (`READY_PER_SLOT`; 0: none). */
  readyPerSlot?: number;
}

export class SlotQueue {
  readonly model: string;
  private slotCount: number;
  private readonly maxQueue: number;
  private readonly now: () => number;
  private readonly observer: QueueObserver | undefined;
  private readonly readyPerSlot: number;
  private running = 0;
  private waiting = 0;
  /** Sent ahead of a slot, in the order their turns came (the server starts them in that order). */
  private ready: Waiter[] = [];
  /** Waiters by source; the map's order is the round: the source served next is first. */
  private readonly bySource = new Map<string, Waiter[]>();
  /** Recent waits as a sliding-window maximum: times rise, waits fall, front is the longest. */
  private recent: { at: number; ms: number }[] = [];
  private meanServiceMs: number | undefined;
  private closedWith: unknown;

  constructor(opts: SlotQueueOptions) {
    this.model = opts.model;
    this.slotCount = Math.max(1, opts.slots);
    this.maxQueue = Math.max(0, opts.maxQueue);
    this.now = opts.now ?? Date.now;
    this.observer = opts.observer;
    this.readyPerSlot = Math.max(0, opts.readyPerSlot ?? READY_PER_SLOT);
  }

  get slots(): number {
    return this.slotCount;
  }

  /** The server's slots as it reports them (`/props`), once it is ready; waiters take new ones at once. */
  setSlots(n: number): void {
    this.slotCount = Math.max(1, n);
    this.handOver();
  }

  /**
   * A slot for one request from `source`: at once while one is free, else after the waiters
   * before it. Rejects with `ModelQueueFull` when `maxQueue` wait already, with the signal's reason
   * when the client gives up, and with the queue's error once it is closed. Resolves to the slot's
   * release (idempotent).
   */
  acquire(source: string, signal?: AbortSignal): Promise<() => void> {
    return this.enter(source, signal, false).then((a) => a.release);
  }

  /**
   * As `acquire`, but resolves as soon as the request may be sent: with its slot, or ahead of one
   * (one per slot), still waiting in the queue's figures until a release gives it the slot.
   */
  admit(source: string, signal?: AbortSignal): Promise<Admission> {
    return this.enter(source, signal, true);
  }

  private enter(source: string, signal: AbortSignal | undefined, ahead: boolean): Promise<Admission> {
    if (this.closedWith !== undefined) return Promise.reject(this.closedWith);
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.running < this.slotCount && this.waiting === 0 && this.ready.length === 0) {
      this.running++;
      this.observer?.waited(this.model, 0);
      return Promise.resolve(this.admission(this.runningReleaser(this.now())));
    }
    if (this.queued >= this.maxQueue) {
      this.observer?.rejected(this.model);
      const displaced = this.displacedFor(source);
      if (!displaced) return Promise.reject(this.full());
      const refusal = this.full("; requests from a client with fewer waiting took its place");
      if (displaced.revoke) {
        this.ready.splice(this.ready.indexOf(displaced), 1);
        displaced.revoke.abort(refusal);
      } else {
        this.remove(displaced);
        displaced.fail(refusal);
      }
    }
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        if (this.remove(waiter)) {
          reject(signal!.reason);
          this.fill();
        }
      };
      const waiter: Waiter = {
        source,
        since: this.now(),
        grant: () => {
          signal?.removeEventListener("abort", onAbort);
          resolve(this.admission(this.runningReleaser(this.now())));
        },
        fail: (err) => {
          signal?.removeEventListener("abort", onAbort);
          reject(err);
        },
      };
      if (ahead) {
        waiter.ahead = () => {
          signal?.removeEventListener("abort", onAbort);
          const revoke = new AbortController();
          waiter.revoke = revoke;
          resolve({ release: this.readyReleaser(waiter), revoked: revoke.signal, begun: () => void (waiter.begun = true) });
        };
      }
      signal?.addEventListener("abort", onAbort, { once: true });
      const line = this.bySource.get(source);
      if (line) line.push(waiter);
      else this.bySource.set(source, [waiter]);
      this.waiting++;
      this.fill();
    });
  }

  private admission(release: () => void): Admission {
    return { release, begun: () => undefined };
  }

  /** Requests waiting for a slot, those sent ahead of one included. */
  private get queued(): number {
    return this.waiting + this.ready.length;
  }

  private full(why = ""): ModelQueueFull {
    const retryAfter = retryAfterSeconds(this.queued, this.slotCount, this.meanServiceMs ?? 1000);
    return new ModelQueueFull(`model "${this.model}" is busy: its ${this.slotCount} slots are in use and ${this.queued} requests wait (--max-queue ${this.maxQueue})${why}; retry after ${retryAfter} s`, retryAfter);
  }

  /**
   * The newest waiter of the source with the most, when that is at least two more than `source`
   * has: one still in line, else one sent ahead whose answer has not begun.
   */
  private displacedFor(source: string): Waiter | undefined {
    const counts = new Map<string, number>();
    for (const [src, line] of this.bySource) counts.set(src, line.length);
    for (const w of this.ready) if (!w.begun) counts.set(w.source, (counts.get(w.source) ?? 0) + 1);
    let biggest: string | undefined;
    for (const [src, n] of counts) if (biggest === undefined || n > counts.get(biggest)!) biggest = src;
    const mine = counts.get(source) ?? 0;
    if (biggest === undefined || counts.get(biggest)! <= mine + 1) return undefined;
    const line = this.bySource.get(biggest);
    if (line?.length) return line[line.length - 1];
    return this.ready.findLast((w) => w.source === biggest && !w.begun);
  }

  figures(): QueueFigures {
    return { slots: this.slotCount, inFlight: this.running, queued: this.queued, waitMs: this.longestRecentWait() };
  }

  /** Refuses every waiter and every later request with `err` (the server is gone). */
  close(err: unknown): void {
    if (this.closedWith !== undefined) return;
    this.closedWith = err;
    const waiters = [...this.bySource.values()].flat();
    this.bySource.clear();
    this.waiting = 0;
    for (const w of waiters) w.fail(err);
  }

  private runningReleaser(grantedAt: number): () => void {
    let done = false;
    return () => {
      if (done) return;
      done = true;
      const served = Math.max(0, this.now() - grantedAt);
      this.meanServiceMs = this.meanServiceMs === undefined ? served : this.meanServiceMs + SERVICE_EWMA * (served - this.meanServiceMs);
      this.running = Math.max(0, this.running - 1);
      this.handOver();
    };
  }

  /**
   * The release of a request sent ahead: while it waits, it gives its place back (its client left,
   * or it failed); once a release gave it its slot, it gives the slot back.
   */
  private readyReleaser(waiter: Waiter): () => void {
    let slot: (() => void) | undefined;
    let done = false;
    waiter.grant = () => void (slot = this.runningReleaser(this.now()));
    return () => {
      if (done) return;
      done = true;
      if (slot) return slot();
      const i = this.ready.indexOf(waiter);
      if (i >= 0) this.ready.splice(i, 1);
      this.fill();
    };
  }

  /** Gives free slots to the requests sent ahead, then to waiters, one source after the other; then sends the next ahead. */
  private handOver(): void {
    while (this.running < this.slotCount && this.ready.length > 0) {
      const waiter = this.ready.shift()!;
      this.running++;
      this.noteWait(this.now() - waiter.since);
      waiter.grant();
    }
    while (this.running < this.slotCount && this.waiting > 0) {
      const waiter = this.nextInTurn();
      this.running++;
      this.noteWait(this.now() - waiter.since);
      waiter.grant();
    }
    this.fill();
  }

  /** Sends waiters ahead of a slot while there is room (one per slot), as long as the next in turn is an `admit` caller. */
  private fill(): void {
    while (this.ready.length < this.slotCount * this.readyPerSlot && this.waiting > 0 && this.closedWith === undefined) {
      const [, line] = this.bySource.entries().next().value!;
      if (!line[0]!.ahead) return;
      const waiter = this.nextInTurn();
      this.ready.push(waiter);
      waiter.ahead!();
    }
  }

  /** Takes the next waiter in the round out of its line: its source goes to the back of the round. */
  private nextInTurn(): Waiter {
    const [source, line] = this.bySource.entries().next().value!;
    const waiter = line.shift()!;
    this.bySource.delete(source);
    if (line.length) this.bySource.set(source, line);
    this.waiting--;
    return waiter;
  }

  /** Takes a waiter out of its line; false when it already left (granted or failed). */
  private remove(waiter: Waiter): boolean {
    const line = this.bySource.get(waiter.source);
    const i = line?.indexOf(waiter) ?? -1;
    if (!line || i < 0) return false;
    line.splice(i, 1);
    if (!line.length) this.bySource.delete(waiter.source);
    this.waiting--;
    return true;
  }

  private noteWait(ms: number): void {
    const at = this.now();
    while (this.recent.length && this.recent[this.recent.length - 1]!.ms <= ms) this.recent.pop();
    this.recent.push({ at, ms });
    this.observer?.waited(this.model, ms);
  }

  private longestRecentWait(): number {
    const since = this.now() - WAIT_WINDOW_MS;
    let drop = 0;
    while (drop < this.recent.length && this.recent[drop]!.at < since) drop++;
    if (drop) this.recent = this.recent.slice(drop);
    return this.recent[0]?.ms ?? 0;
  }
}
