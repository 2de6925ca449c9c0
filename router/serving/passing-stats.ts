/**
 * Figures of a request this node forwarded to a peer, read from the answer as it passes through
 * (so `/api/v1/stats` on the entry node tells the last request too): the bytes go on to the client
 * unchanged and unbuffered; a bounded copy of the end (all of a JSON body up to a limit) is kept and
 * read only when someone asks for the stats.
 */
import { figuresOf, figuresOfSse, toStats, type ReportedFigures, type RequestStats } from "../../metrics/request-stats.ts";
import { tappedAnswer } from "../http/stream-tap.ts";

/** What of a stream is kept for its figures: they are in its last events. */
export const SSE_TAIL_BYTES = 16 * 1024;
/** A JSON answer is read whole up to this; a bigger one (embeddings of a long batch) gives no figures. */
const JSON_MAX_BYTES = 1024 * 1024;

const decoder = new TextDecoder();

/** `kept` with `chunk` after it, cut to its last `max` bytes (pure). */
export function keepLast(kept: Uint8Array, chunk: Uint8Array, max: number): Uint8Array<ArrayBuffer> {
  const joined = new Uint8Array(Math.min(max, kept.length + chunk.length));
  const fromKept = Math.max(0, joined.length - chunk.length);
  joined.set(kept.subarray(kept.length - fromKept), 0);
  joined.set(chunk.subarray(Math.max(0, chunk.length - joined.length)), fromKept);
  return joined;
}

/** What of an SSE tail is read for figures first: llama-server's final event is well under it. */
const SSE_NEAR_BYTES = 4 * 1024;

/** The figures in what was kept of an answer: SSE events, or a whole JSON body. */
export function figuresOfKept(kept: TailKeeper, sse: boolean, whole: boolean): ReportedFigures {
  if (sse) return figuresOfSseTail(kept);
  if (!whole) return { timings: undefined, usage: undefined };
  try {
    return figuresOf(JSON.parse(decoder.decode(kept.bytes())));
  } catch {
    return { timings: undefined, usage: undefined };
  }
}

/** The figures in a stream's last events: its last few KiB read first, all that was kept only when they hold none. */
export function figuresOfSseTail(tail: TailKeeper): ReportedFigures {
  const near = figuresOfSse(decoder.decode(tail.last(SSE_NEAR_BYTES)));
  return near.timings !== undefined || tail.size <= SSE_NEAR_BYTES ? near : figuresOfSse(decoder.decode(tail.bytes()));
}

/**
 * The last `max` bytes of a stream, kept as the chunks that hold them (each chunk is kept, not
 * copied; they are joined only when asked): what a chunk costs is a push, not a copy of the tail.
 */
export class TailKeeper {
  private chunks: Uint8Array[] = [];
  private held = 0;

  constructor(private readonly max: number) {}

  /** Bytes held now (whole chunks: it may be a little over `max`). */
  get size(): number {
    return this.held;
  }

  push(chunk: Uint8Array): void {
    this.chunks.push(chunk);
    this.held += chunk.length;
    // Chunks wholly before the last `max` bytes go.
    while (this.chunks.length > 1 && this.held - this.chunks[0]!.length >= this.max) this.held -= this.chunks.shift()!.length;
  }

  /** The last `n` bytes (fewer when fewer passed), at most `max`. */
  last(n: number): Uint8Array {
    const want = Math.min(n, this.max, this.held);
    const out = new Uint8Array(want);
    let at = want;
    for (let i = this.chunks.length - 1; i >= 0 && at > 0; i--) {
      const c = this.chunks[i]!;
      const take = Math.min(at, c.length);
      out.set(c.subarray(c.length - take), at - take);
      at -= take;
    }
    return out;
  }

  /** The last `max` bytes. */
  bytes(): Uint8Array {
    return this.last(this.max);
  }
}

/** `res` with a body that reports, once it has all passed, the request's figures (a 200 only). */
export function recordPassingStats(res: Response, model: string, route: string, started: number, onStats: (stats: () => RequestStats) => void): Response {
  if (res.status !== 200 || !res.body) return res;
  const sse = (res.headers.get("content-type") ?? "").includes("text/event-stream");
  const max = sse ? SSE_TAIL_BYTES : JSON_MAX_BYTES;
  const kept = new TailKeeper(max);
  let total = 0;
  let firstByteMs: number | undefined;
  return tappedAnswer(res, {
    onChunk: (chunk) => {
      firstByteMs ??= performance.now() - started;
      total += chunk.length;
      if (sse || total <= max) kept.push(chunk);
      return undefined;
    },
    onEnd: (end) => {
      if (!end.done) return;
      const totalMs = performance.now() - started;
      const whole = total <= max;
      onStats(() => toStats(model, route, figuresOfKept(kept, sse, whole), { firstByteMs: sse ? firstByteMs : undefined, totalMs }));
    },
    // A client may let go as soon as the last event has come (the OpenAI SDK does at `[DONE]`),
    // before the peer's stream has ended: the answer was whole when its figures have passed.
    onCancel: () => {
      if (!sse) return;
      const figures = figuresOfKept(kept, true, true);
      if (figures.usage === undefined && figures.timings === undefined) return;
      const totalMs = performance.now() - started;
      onStats(() => toStats(model, route, figures, { firstByteMs, totalMs }));
    },
  });
}
