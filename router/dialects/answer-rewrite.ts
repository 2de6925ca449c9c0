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
import { tapStream } from "../http/stream-tap.ts";

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

/** `body` with each whole event rewritten, in the tap it passes through when it has one (`stream-tap.ts`). */
function rewriteStream(body: ReadableStream<Uint8Array>, rewrite: EventRewrite): ReadableStream<Uint8Array> {
  const decoder = new TextDecoder();
  const encoder = new TextEncoder();
  let pending = "";
  return tapStream(body, {
    onChunk(chunk) {
      const text = decoder.decode(chunk, { stream: true });
      const { events, held } = splitSse(pending, text, MAX_HELD_EVENT_BYTES);
      if (held === undefined) {
        // An event past the bound is passed on as it came (as the guard before this does), not held whole.
        const out = encoder.encode(pending + text);
        pending = "";
        return out;
      }
      pending = held;
      return events.length === 0 ? [] : encoder.encode(events.map((e) => rewritten(e, rewrite)).join(""));
    },
    onEnd(end) {
      if (!end.done) return;
      const tail = pending + decoder.decode();
      return tail ? { add: encoder.encode(tail) } : undefined;
    },
  });
}
