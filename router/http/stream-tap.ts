/**
 * One pass-through over an answer's body that everything watching or reshaping it on its way out
 * hooks into: the proxy (keep-alive comments, the stats tail, the lease), the SSE guard, the
 * request counts, a peer's figures, a dialect's event rewrite, the front door's watch on a client
 * that stopped reading. A body that is a tap's output, not yet read, takes a new tap's hooks into
 * that same tap (`tapStream`), so a streamed answer crosses one pull loop however many look at it,
 * instead of one nested stream per watcher (each a promise and a copy per chunk: the router's CPU).
 *
 * Hooks run in the order they were added, each seeing what the hooks before it passed on:
 * `onChunk` may hold bytes back or pass others; `onEnd` is told once how the source ended and may
 * add last bytes or turn a failure into a clean end (the guard's error event); `onCancel` is told
 * when the client cancels, or is cut for reading nothing (`stall: "client"`); `onStall` on the
 * source side is asked, while the source is quiet, for bytes to send (a keep-alive comment). What
 * happens at each event is `tapStep`'s decision, and when a timer is due `stallDue`'s (both pure).
 */

/** How the source ended: whole, or its read failed. */
export type TapEnd = { done: true } | { done: false; error: unknown };

export interface TapHooks {
  /** A chunk on its way: undefined passes it on as it is; else what to pass instead (an empty array holds it back). */
  onChunk?(chunk: Uint8Array): Uint8Array | Uint8Array[] | undefined;
  /** The source ended (once, never after a cancel): bytes to add at the end, and the end the later hooks see instead. */
  onEnd?(end: TapEnd): { add?: Uint8Array; end?: TapEnd } | void;
  /** The client cancelled, or was cut for reading nothing (once, never after an end). */
  onCancel?(reason: unknown): void;
  /**
   * `source`: the source has been quiet for `ms` since bytes last went out; what `call` returns (if
   * anything) goes out, through the later hooks. `client`: a chunk has waited `ms` unread; the
   * answer is cut (the source cancelled, every `onCancel` told, the client's read failing).
   */
  onStall?: { side: "source" | "client"; ms: number; call(): Uint8Array | undefined };
}

/** Where a tap is in its life. */
export type TapPhase = "open" | "ended" | "cancelled";

/** What happens to a tap. */
export type TapEvent = "chunk" | "end" | "fail" | "cancel" | "quiet" | "unread";

/** What the tap does about one event, in this order. */
export type TapAction = "chunkHooks" | "endHooks" | "cancelHooks" | "stallHooks" | "pass" | "finish" | "cancelSource" | "failRead" | "stopTimer";

/**
 * What a tap does at `event` in `phase`, and its phase after (pure). Once ended or cancelled it
 * does nothing more: an end is told once, a late chunk or timer is dropped, and a cancel after
 * the end (or an end after a cancel) tells no hook.
 */
export function tapStep(phase: TapPhase, event: TapEvent): { phase: TapPhase; actions: readonly TapAction[] } {
  return phase === "open" ? OPEN_STEPS[event] : { phase, actions: NOTHING };
}

// The steps as constants: a tap takes one per chunk, and a chunk should cost no allocation here.
const NOTHING: readonly TapAction[] = [];
const OPEN_STEPS: Record<TapEvent, { phase: TapPhase; actions: readonly TapAction[] }> = {
  chunk: { phase: "open", actions: ["chunkHooks", "pass"] },
  quiet: { phase: "open", actions: ["stallHooks", "pass"] },
  end: { phase: "ended", actions: ["stopTimer", "endHooks", "pass", "finish"] },
  fail: { phase: "ended", actions: ["stopTimer", "endHooks", "pass", "finish"] },
  cancel: { phase: "cancelled", actions: ["stopTimer", "cancelHooks", "cancelSource"] },
  unread: { phase: "cancelled", actions: ["stopTimer", "stallHooks", "cancelHooks", "cancelSource", "failRead"] },
};

/** What the tap's clock sees when it ticks. */
export interface TapClock {
  now: number;
  /** When bytes last went to the client (or the tap started). */
  lastOut: number;
  /** Whether the client is waiting for bytes (a read is pending), or a chunk waits for it. */
  reading: boolean;
}

/**
 * Which stall is due at a tick (pure): the client's (`unread`: a chunk waited `clientMs` unread),
 * the source's (`quiet`: the client waits and nothing went out for `sourceMs`), or none.
 */
export function stallDue(clock: TapClock, sourceMs: number | undefined, clientMs: number | undefined): "quiet" | "unread" | undefined {
  const idle = clock.now - clock.lastOut;
  if (!clock.reading && clientMs !== undefined && idle >= clientMs) return "unread";
  if (clock.reading && sourceMs !== undefined && idle >= sourceMs) return "quiet";
  return undefined;
}

const taps = new WeakMap<ReadableStream<Uint8Array>, Tap>();

/**
 * `body` with `hooks` on its way: the same stream when it is a tap's output not yet read nor
 * cancelled (the hooks join that tap), else a tap over it.
 */
export function tapStream(body: ReadableStream<Uint8Array>, hooks: TapHooks): ReadableStream<Uint8Array> {
  const existing = taps.get(body);
  if (existing && !body.locked && existing.open) {
    existing.hooks.push(hooks);
    return body;
  }
  const tap = new Tap(body, hooks);
  taps.set(tap.out, tap);
  return tap.out;
}

/** `res` with `hooks` on its body's way (the same answer when its body is a tap's, not yet read). */
export function tappedAnswer(res: Response, hooks: TapHooks): Response {
  if (!res.body) return res;
  const body = tapStream(res.body, hooks);
  return body === res.body ? res : new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
}

const readerOf = (body: ReadableStream<Uint8Array>) => body.getReader();
type Reader = ReturnType<typeof readerOf>;

class Tap {
  readonly hooks: TapHooks[];
  readonly out: ReadableStream<Uint8Array>;
  private readonly source: Reader;
  private controller!: ReadableStreamDefaultController<Uint8Array>;
  private phase: TapPhase = "open";
  private timer: Timer | undefined;
  private started = false;
  private lastOut = 0;
  private reading = false;

  constructor(body: ReadableStream<Uint8Array>, first: TapHooks) {
    this.hooks = [first];
    this.source = readerOf(body);
    this.out = new ReadableStream<Uint8Array>(
      {
        start: (controller) => void (this.controller = controller),
        pull: () => this.pull(),
        cancel: (reason) => void this.event("cancel", reason),
      },
      { highWaterMark: 0 },
    );
  }

  /** Neither ended nor cancelled: hooks added now will be told how it ends. */
  get open(): boolean {
    return this.phase === "open";
  }

  private async pull(): Promise<void> {
    if (!this.started) this.startClock();
    this.reading = true;
    // Every pull passes something or ends: Bun's server pulls no more after one that does neither.
    while (this.phase === "open") {
      let step: Awaited<ReturnType<typeof this.source.read>>;
      try {
        step = await this.source.read();
      } catch (error) {
        this.event("fail", { done: false, error });
        return;
      }
      if (step.done) {
        this.event("end", { done: true });
        return;
      }
      if (this.event("chunk", step.value)) return;
    }
  }

  /** Acts on one event (`tapStep`); whether any bytes went out. */
  private event(event: TapEvent, arg?: unknown): boolean {
    const { phase, actions } = tapStep(this.phase, event);
    this.phase = phase;
    let pieces: Uint8Array[] = [];
    let end: TapEnd = arg as TapEnd;
    let sent = false;
    for (const action of actions) {
      switch (action) {
        case "stopTimer":
          clearInterval(this.timer);
          break;
        case "chunkHooks":
          pieces = this.through(0, [arg as Uint8Array]);
          break;
        case "stallHooks":
          pieces = this.stalled(event === "quiet" ? "source" : "client");
          break;
        case "endHooks":
          for (let i = 0; i < this.hooks.length; i++) {
            const said = this.hooks[i]!.onEnd?.(end);
            if (!said) continue;
            if (said.add) pieces.push(...this.through(i + 1, [said.add]));
            if (said.end) end = said.end;
          }
          break;
        case "pass":
          for (const piece of pieces) {
            if (piece.length === 0) continue;
            this.controller.enqueue(piece);
            sent = true;
          }
          if (sent) {
            this.lastOut = performance.now();
            this.reading = false;
          }
          break;
        case "finish":
          if (end.done) this.controller.close();
          else this.controller.error(end.error);
          break;
        case "cancelHooks": {
          const reason = event === "unread" ? new Error("the client stopped reading") : arg;
          for (const h of this.hooks) h.onCancel?.(reason);
          break;
        }
        case "cancelSource":
          void this.source.cancel(event === "unread" ? new Error("the client stopped reading") : arg).catch(() => undefined);
          break;
        case "failRead":
          this.controller.error(new Error(`the client read nothing for ${this.clientMs()} ms`));
          break;
      }
    }
    return sent;
  }

  /** `pieces` through the hooks from `from` on. */
  private through(from: number, pieces: Uint8Array[]): Uint8Array[] {
    let out = pieces;
    for (let i = from; i < this.hooks.length; i++) {
      const onChunk = this.hooks[i]!.onChunk;
      if (!onChunk) continue;
      // One piece, passed on as it came or as one other: the common case, with no new array.
      if (out.length === 1) {
        const said = onChunk(out[0]!);
        if (said === undefined) continue;
        if (!Array.isArray(said)) {
          out[0] = said;
          continue;
        }
        out = said;
        continue;
      }
      const next: Uint8Array[] = [];
      for (const piece of out) {
        const said = onChunk(piece);
        if (said === undefined) next.push(piece);
        else if (Array.isArray(said)) next.push(...said);
        else next.push(said);
      }
      out = next;
    }
    return out;
  }

  /** Each stall hook of `side` told; what the source side's add goes out through the hooks after them. */
  private stalled(side: "source" | "client"): Uint8Array[] {
    const out: Uint8Array[] = [];
    for (let i = 0; i < this.hooks.length; i++) {
      const stall = this.hooks[i]!.onStall;
      if (stall?.side !== side) continue;
      const add = stall.call();
      if (add && side === "source") out.push(...this.through(i + 1, [add]));
    }
    return out;
  }

  private sourceMs(): number | undefined {
    return this.minMs("source");
  }

  private clientMs(): number | undefined {
    return this.minMs("client");
  }

  private minMs(side: "source" | "client"): number | undefined {
    let ms: number | undefined;
    for (const h of this.hooks) if (h.onStall?.side === side) ms = Math.min(ms ?? Infinity, h.onStall.ms);
    return ms;
  }

  /** One coarse timer for every stall watched (none when no hook watches one): a third of the shortest. */
  private startClock(): void {
    this.started = true;
    this.lastOut = performance.now();
    const sourceMs = this.sourceMs();
    const clientMs = this.clientMs();
    const shortest = Math.min(sourceMs ?? Infinity, clientMs ?? Infinity);
    if (shortest === Infinity) return;
    this.timer = setInterval(() => {
      const due = stallDue({ now: performance.now(), lastOut: this.lastOut, reading: this.reading }, sourceMs, clientMs);
      // A hook that had nothing to send (inside an event) is asked again at the next tick; bytes
      // sent answer the client's pending read, and the source's next chunk its next one.
      if (due === "quiet" && this.event("quiet")) this.reading = true;
      else if (due === "unread") this.event("unread");
    }, Math.max(1, shortest / 3));
    this.timer.unref();
  }
}
