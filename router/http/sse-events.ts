/**
 * Reads an SSE stream event by event as its text arrives (pure, incremental) to tell whether the
 * stream ended with its API's final event: `data: [DONE]` or an error (chat and text completions),
 * `response.completed` / `.failed` / `.incomplete` / `error` (Responses), `message_stop` or `error`
 * (Anthropic messages). It keeps only the head of each line and of each event's data, so a final
 * event of any size (llama-server's `response.completed` repeats the whole answer) costs the
 * same bounded memory and is still recognised.
 */

/** Characters kept of a line or an event's data: enough for a field name, `[DONE]` and a leading `"type"`. */
export const SSE_HEAD_CHARS = 256;

export interface SseEvent {
  /** The `event:` field; "message" when there was none (SSE's default). */
  event: string;
  /** The head of the event's data. */
  data: string;
}

export interface SseState {
  /** The head of the line not yet ended. */
  partial: string;
  /** The previous text ended in `\r`: a `\n` starting the next belongs to the same line end. */
  afterCr: boolean;
  /** Fields of the event being read. */
  event: string | undefined;
  data: string | undefined;
  /** The last complete event. */
  last: SseEvent | undefined;
}

export const emptySse = (): SseState => ({ partial: "", afterCr: false, event: undefined, data: undefined, last: undefined });

const head = (s: string) => (s.length > SSE_HEAD_CHARS ? s.slice(0, SSE_HEAD_CHARS) : s);

/** One whole line applied to the event being read (SSE's field rules; comments skipped). */
function applyLine(s: SseState, line: string): void {
  if (line === "") {
    // An event without data is not dispatched (SSE): a lone `event:` or a comment block ends nothing.
    if (s.data !== undefined) s.last = { event: s.event ?? "message", data: s.data };
    s.event = undefined;
    s.data = undefined;
    return;
  }
  if (line.startsWith(":")) return;
  const colon = line.indexOf(":");
  const field = colon === -1 ? line : line.slice(0, colon);
  let value = colon === -1 ? "" : line.slice(colon + 1);
  if (value.startsWith(" ")) value = value.slice(1);
  if (field === "event") s.event = value;
  else if (field === "data") s.data = head(s.data === undefined ? value : `${s.data}\n${value}`);
}

/** The state after `text`, the next piece of the stream (decoded with `stream: true`). */
export function readSse(state: SseState, text: string): SseState {
  const s: SseState = { ...state };
  let i = 0;
  if (s.afterCr && text.startsWith("\n")) i = 1;
  s.afterCr = false;
  let nextCr = text.indexOf("\r", i);
  while (i < text.length) {
    if (nextCr !== -1 && nextCr < i) nextCr = text.indexOf("\r", i);
    const nextLf = text.indexOf("\n", i);
    const end = nextCr === -1 ? nextLf : nextLf === -1 ? nextCr : Math.min(nextCr, nextLf);
    if (end === -1) {
      s.partial = head(s.partial + text.slice(i, i + SSE_HEAD_CHARS));
      break;
    }
    applyLine(s, head(s.partial + text.slice(i, Math.min(end, i + SSE_HEAD_CHARS))));
    s.partial = "";
    i = end + 1;
    if (text[end] === "\r") {
      if (i === text.length) s.afterCr = true;
      else if (text[i] === "\n") i++;
    }
  }
  return s;
}

/** Final events of the Responses and Anthropic APIs (`error` ends both with an explanation). */
const FINAL_EVENTS = new Set(["response.completed", "response.failed", "response.incomplete", "message_stop", "error"]);

/** The `"type"` a JSON event's data starts with, for streams that name events only there. */
function typeOfData(data: string): string | undefined {
  return /^\{\s*"type"\s*:\s*"([^"\\]+)"/.exec(data)?.[1];
}

/** Whether `last` is a final event: the stream is complete and needs no error event added. */
export function isFinalEvent(last: SseEvent | undefined, route?: string): boolean {
  if (!last) return false;
  if (last.data.trim() === "[DONE]") return true;
  // A stream another node already ended with its error: chat and text completions name no error
  // event. On Anthropic's route such an event is an older node's, which its SDKs skip: there it
  // ends nothing, and the stream gets Anthropic's error event after it.
  if (last.event === "message" && /^\{\s*"error"\s*:/.test(last.data)) return route !== "/v1/messages";
  const name = last.event === "message" ? typeOfData(last.data) : last.event;
  return name !== undefined && FINAL_EVENTS.has(name);
}

/** Whether the whole of `text`, read as one stream, ends with a final event (tests and one-shot callers). */
export function sseEndedCleanly(text: string): boolean {
  return isFinalEvent(readSse(emptySse(), text).last);
}
