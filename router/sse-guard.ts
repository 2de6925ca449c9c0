/**
 * Passes an SSE answer on whole event by whole event, and ends it in its dialect's words when the
 * server or node answering it is gone: the source failed, or closed before the dialect's final
 * event (a killed llama-server closes its socket like a finished one). The bytes of an event still
 * in flight are dropped rather than sent half, so an error never lands glued onto a cut event.
 * Used where an answer leaves a server for a client: the serving node's proxy and the node that
 * forwarded the request to it (which sees a clean ending from the first and adds nothing).
 */
import { brokenStreamEnding, endOfLastEvent, MAX_HELD_EVENT_BYTES } from "./stream-endings.ts";
import { emptySse, isFinalEvent, readSse } from "./sse-events.ts";

const encoder = new TextEncoder();

export interface Broken {
  message: string;
  code: string;
}

/** `body`, event by event, ended with `route`'s error event saying `gone` when it breaks. */
export function guardSse(body: ReadableStream<Uint8Array>, route: string, gone: Broken): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let events = emptySse();
  let held: Uint8Array = new Uint8Array(0);
  const end = (controller: ReadableStreamDefaultController<Uint8Array>, why: Broken) => {
    try {
      controller.enqueue(encoder.encode(brokenStreamEnding(route, why.message, why.code)));
      controller.close();
    } catch {
      // The client left first: nobody reads the ending.
    }
  };
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        for (;;) {
          let step: Awaited<ReturnType<typeof reader.read>>;
          try {
            step = await reader.read();
          } catch {
            return end(controller, gone);
          }
          if (step.done) {
            // A tail that never became an event: the last one passed tells whether the stream finished.
            if (isFinalEvent(events.last)) {
              if (held.length > 0) controller.enqueue(held);
              return controller.close();
            }
            return end(controller, gone);
          }
          const joined = held.length === 0 ? step.value : concat(held, step.value);
          const cut = joined.length > MAX_HELD_EVENT_BYTES ? joined.length : endOfLastEvent(joined);
          held = joined.subarray(cut);
          if (cut === 0) continue;
          const whole = joined.subarray(0, cut);
          events = readSse(events, decoder.decode(whole, { stream: true }));
          controller.enqueue(whole);
          return;
        }
      },
      cancel(reason) {
        return reader.cancel(reason).catch(() => undefined);
      },
    },
    { highWaterMark: 0 },
  );
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

/** `res` with its SSE body guarded (`guardSse`); any other answer as it is. */
export function guardedAnswer(res: Response, route: string, gone: Broken): Response {
  if (!res.body || !(res.headers.get("content-type") ?? "").includes("text/event-stream")) return res;
  return new Response(guardSse(res.body, route, gone), { status: res.status, statusText: res.statusText, headers: res.headers });
}
