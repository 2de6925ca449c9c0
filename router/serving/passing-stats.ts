/**
 * Figures of a request this node forwarded to a peer, read from the answer as it passes through
 * (so `/api/v1/stats` on the entry node tells the last request too): the bytes go on to the client
 * unchanged and unbuffered; a bounded copy of the end (all of a JSON body up to a limit) is kept and
 * read only when someone asks for the stats.
 */
import { figuresOf, figuresOfSse, toStats, type ReportedFigures, type RequestStats } from "../../metrics/request-stats.ts";

/** What is kept of an SSE answer: its last events, where llama-server reports figures. */
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

/** The figures in what was kept of an answer (pure): SSE events, or a whole JSON body. */
export function figuresOfKept(kept: Uint8Array, sse: boolean, whole: boolean): ReportedFigures {
  if (sse) return figuresOfSse(decoder.decode(kept));
  if (!whole) return { timings: undefined, usage: undefined };
  try {
    return figuresOf(JSON.parse(decoder.decode(kept)));
  } catch {
    return { timings: undefined, usage: undefined };
  }
}

/** `res` with a body that reports, once it has all passed, the request's figures (a 200 only). */
export function recordPassingStats(res: Response, model: string, route: string, started: number, onStats: (stats: () => RequestStats) => void): Response {
  if (res.status !== 200 || !res.body) return res;
  const sse = (res.headers.get("content-type") ?? "").includes("text/event-stream");
  const max = sse ? SSE_TAIL_BYTES : JSON_MAX_BYTES;
  const reader = res.body.getReader();
  let kept: Uint8Array = new Uint8Array(0);
  let total = 0;
  let firstByteMs: number | undefined;
  const body = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        let step: Awaited<ReturnType<typeof reader.read>>;
        try {
          step = await reader.read();
        } catch (err) {
          controller.error(err);
          return;
        }
        if (step.done) {
          const totalMs = performance.now() - started;
          const last = kept;
          const whole = total <= max;
          onStats(() => toStats(model, route, figuresOfKept(last, sse, whole), { firstByteMs: sse ? firstByteMs : undefined, totalMs }));
          controller.close();
          return;
        }
        firstByteMs ??= performance.now() - started;
        total += step.value.length;
        if (sse || total <= max) kept = keepLast(kept, step.value, max);
        controller.enqueue(step.value);
      },
      cancel(reason) {
        void reader.cancel(reason).catch(() => undefined);
      },
    },
    { highWaterMark: 0 },
  );
  return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
}
