/**
 * An answer rewritten on its way back to the client, for a dialect that llama-server answers
 * almost right: a successful JSON answer as a whole, an SSE answer event by event (each event's
 * JSON data given to a function that may return new data), anything else (an error, a refusal)
 * as it came. Events pass whole and in order; one the function leaves alone keeps its exact bytes.
 */
import { isObject, type Json, type JsonObject } from "./json.ts";

/** Rewrites one event's JSON data (`event` is its `event:` field, "message" without one); undefined keeps the event as it came. */
export type EventRewrite = (event: string, data: JsonObject) => JsonObject | undefined;

export interface AnswerRewrite {
  /** A 200 JSON answer, whole. */
  whole(json: Json): Json;
  /** A new rewrite for one stream (it may keep state from event to event). */
  stream(): EventRewrite;
}

/** Whole events at the head of `text` (each with its ending blank line), and what is left of one still arriving (pure). */
export function splitEvents(text: string): { events: string[]; rest: string } {
  const events: string[] = [];
  let start = 0;
  let i = 0;
  let lineStart = 0;
  while (i < text.length) {
    const ch = text[i]!;
    if (ch !== "\n" && ch !== "\r") {
      i++;
      continue;
    }
    // A CR at the very end may be the first half of a CRLF still in flight.
    if (ch === "\r" && i === text.length - 1) break;
    const end = ch === "\r" && text[i + 1] === "\n" ? i + 2 : i + 1;
    if (i === lineStart) {
      // A blank line: the event ends here (a blank line with no event before it is passed on with the next).
      events.push(text.slice(start, end));
      start = end;
    }
    i = end;
    lineStart = end;
  }
  return { events, rest: text.slice(start) };
}

/** One whole event, its data rewritten by `rewrite` when it is a JSON object and `rewrite` says so; otherwise the same text (pure). */
export function rewriteEvent(raw: string, rewrite: EventRewrite): string {
  const lines = raw.split(/\r\n|\r|\n/);
  let event = "message";
  const data: string[] = [];
  const others: string[] = [];
  for (const line of lines) {
    if (line === "") continue;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") data.push(value);
    else {
      if (field === "event") event = value;
      others.push(line);
    }
  }
  if (data.length === 0) return raw;
  let json: unknown;
  try {
    json = JSON.parse(data.join("\n"));
  } catch {
    return raw;
  }
  if (!isObject(json)) return raw;
  const out = rewrite(event, json);
  if (out === undefined) return raw;
  return [...others, `data: ${JSON.stringify(out)}`, "", ""].join("\n");
}

const HEADERS_OF_THE_OLD_BODY = ["content-length", "content-encoding"];

function headersFor(res: Response): Headers {
  const headers = new Headers(res.headers);
  for (const h of HEADERS_OF_THE_OLD_BODY) headers.delete(h);
  return headers;
}

/** `res` rewritten by `rewrite` when it is a 200 JSON answer or an SSE stream; any other answer as it is. */
export async function rewriteAnswer(res: Response, rewrite: AnswerRewrite): Promise<Response> {
  const type = res.headers.get("content-type") ?? "";
  if (!res.body) return res;
  if (type.includes("text/event-stream")) {
    return new Response(rewriteStream(res.body, rewrite.stream()), { status: res.status, statusText: res.statusText, headers: headersFor(res) });
  }
  if (res.status !== 200 || !type.includes("application/json")) return res;
  const text = await res.text();
  let out = text;
  try {
    out = JSON.stringify(rewrite.whole(JSON.parse(text) as Json));
  } catch {
    // Not JSON after all: the client gets it as it came.
  }
  return new Response(out, { status: res.status, statusText: res.statusText, headers: headersFor(res) });
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
          const { events, rest } = splitEvents(pending + decoder.decode(step.value, { stream: true }));
          pending = rest;
          if (events.length === 0) continue;
          controller.enqueue(encoder.encode(events.map((e) => rewriteEvent(e, rewrite)).join("")));
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
