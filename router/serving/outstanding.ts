/**
 * Requests in flight per (model, server), as this node counts them: one counts from the moment it
 * is sent until its answer's body has been read whole, cancelled (the client left) or failed. The
 * router picks among a model's servers by these counts. Only pairs with a request in flight are
 * kept, so the map never holds more than models x servers entries.
 */
import { tappedAnswer } from "../http/stream-tap.ts";

export class Outstanding {
  private readonly counts = new Map<string, number>();

  private static key(model: string, server: string): string {
    return `${model}\u0000${server}`;
  }

  count(model: string, server: string): number {
    return this.counts.get(Outstanding.key(model, server)) ?? 0;
  }

  /** Pairs with requests in flight now. */
  get size(): number {
    return this.counts.size;
  }

  /** Counts one request to `server`; the returned function ends it (once, however often it is called). */
  begin(model: string, server: string): () => void {
    const key = Outstanding.key(model, server);
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      const n = (this.counts.get(key) ?? 1) - 1;
      if (n > 0) this.counts.set(key, n);
      else this.counts.delete(key);
    };
  }
}

/** Answers whose body was read whole from the server before they were made: nothing more is to come. */
const whole = new WeakSet<Response>();

/** Marks `res` as one whose body is already in memory whole (the proxy's JSON answers). */
export function wholeBody(res: Response): Response {
  whole.add(res);
  return res;
}

/**
 * The response, whose `end` is called once its body has been read whole, cancelled or failed (at
 * once when it has none, or has it in memory already: wrapping that in a stream would only make
 * the answer go out chunked, at a cost per request). The body passes chunk by chunk, unbuffered
 * (an SSE stream stays live), in the tap it already passes through when it has one (`stream-tap.ts`).
 */
export function untilBodyEnds(res: Response, end: () => void): Response {
  // Whether it is whole first: asking for a whole answer's body makes a stream of it.
  if (whole.has(res) || !res.body) {
    end();
    return res;
  }
  return tappedAnswer(res, { onEnd: end, onCancel: end });
}
