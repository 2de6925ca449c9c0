/**
 * An answer rewritten on its way back to the client, for a dialect that llama-server answers
 * almost right: a successful JSON answer as a whole, an SSE answer event by event (each event's
 * JSON data given to a function that may return new data), anything else (an error, a refusal)
 * as it came. Events pass whole and in order; one the function leaves alone keeps its exact bytes.
 */
import { isObject, type Json, type JsonObject } from "../http/json.ts";
import { readEvent, splitSse, type WholeSseEvent } from "../http/sse-split.ts";
import { MAX_HELD_EVENT_BYTES } from "../http/stream-endings.ts";
import { headersForNewBody, MAX_REWRITTEN_ANSWER_BYTES, textWithin } from "../http/bounded-body.ts";

/** Rewrites one event's JSON data (`event` is its `event:` field, "message" without one); undefined keeps the event as it came. */
export type EventRewrite = (event: string, data: JsonObject) => JsonObject | undefined;

export interface AnswerRewrite {
  /** A 200 JSON answer, whole. */
  whole(json: Json): Json;
  /** A new rewrite for one stream (it may keep state from event to event). */
  stream(): EventRewrite;
}

/** One whole event's text, its data rewritten by `rewrite` when it is a JSON object and `rewrite` says so; otherwise the same text (pure). */
export function rewriteEvent(raw: string, rewrite: EventRewrite): string {
  return rewritten(readEvent(raw), rewrite);
}

function rewritten(e: WholeSseEvent, rewrite: EventRewrite): string {
  if (e.data === undefined) return e.raw;
  let json: unknown;
  try {
    json = JSON.parse(e.data);
  } catch {
    return e.raw;
  }
  if (!isObject(json)) return e.raw;
  const out = rewrite(e.event, json);
  if (out === undefined) return e.raw;
  // Its other lines (name, id, comments) as they came, its new data on one line.
  const others = e.raw.split(/\r\n|\r|\n/).filter((line) => line !== "" && line !== "data" && !line.startsWith("data:"));
  return [...others, `data: ${JSON.stringify(out)}`, "", ""].join("\n");
}

/** `res` rewritten by `rewrite` when it is a 200 JSON answer or an SSE stream; any other answer as it is. */
export async function rewriteAnswer(res: Response, rewrite: AnswerRewrite): Promise<Response> {
  const type = res.headers.get("content-type") ?? "";
  if (!res.body) return res;
  if (type.includes("text/event-stream")) {
    return new Response(rewriteStream(res.body, rewrite.stream()), { status: res.status, statusText: res.statusText, headers: headersForNewBody(res) });
  }
  if (res.status !== 200 || !type.includes("application/json")) return res;
  const text = await textWithin(res, MAX_REWRITTEN_ANSWER_BYTES);
  let out = text;
  try {
    out = JSON.stringify(rewrite.whole(JSON.parse(text) as Json));
  } catch {
    // Not JSON after all: the client gets it as it came.
  }
  return new Response(out, { status: res.status, statusText: res.statusText, headers: headersForNewBody(res) });
}

function rewriteStream(body: ReadableStream<Uint8Array>, rewrite: EventRewrite): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  let pending = "";
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        for (;;) {
          let step: Awaited<ReturnType<typeof reader.read>>;
          try {
            step = await reader.read();
          } catch (err) {
            controller.error(err);
            return;
          }
          if (step.done) {
            const tail = pending + decoder.decode();
            if (tail) controller.enqueue(encoder.encode(tail));
            controller.close();
            return;
          }
          const text = decoder.decode(step.value, { stream: true });
          const { events, held } = splitSse(pending, text, MAX_HELD_EVENT_BYTES);
          if (held === undefined) {
            // An event past the bound is passed on as it came (as the guard before this does), not held whole.
            controller.enqueue(encoder.encode(pending + text));
            pending = "";
            return;
          }
          pending = held;
          if (events.length === 0) continue;
          controller.enqueue(encoder.encode(events.map((e) => rewritten(e, rewrite)).join("")));
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
