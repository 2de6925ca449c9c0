/**
 * Splits an SSE stream's text into whole events as it arrives (pure, incremental, bounded): the
 * caller keeps the text of the event still arriving and hands it back with the next decoded piece.
 * Lines end in LF, CRLF or CR (a CR at the end of a piece waits to see whether an LF follows), a
 * blank line ends an event, and each event keeps its exact text, so a caller that leaves it alone
 * can pass its bytes on unchanged. The router reads whole events with it (the Responses and Ollama
 * translations, answer rewrites); `sse-events.ts` keeps only the head of each event instead, to
 * recognise a final event of any size in bounded memory, and `stream-endings.ts` finds where events
 * end in the proxy's bytes without decoding them.
 */

export interface WholeSseEvent {
  /** The last `event:` field; "message" when there was none (SSE's default). */
  event: string;
  /** The `data:` lines' values joined by `\n`; undefined when the event had none (SSE dispatches nothing then). */
  data: string | undefined;
  /** Whether a line of it is a comment (`:`), as a keep-alive is. */
  comment: boolean;
  /** Its exact text, with the blank line that ended it. */
  raw: string;
}

export interface SseSplit {
  /** The whole events the piece completed, in order. */
  events: WholeSseEvent[];
  /** The text of the event still arriving, for the next call; undefined when it passed the caller's bound (the stream is broken). */
  held: string | undefined;
}

/** One whole event's fields from its text (SSE's rules: the field name up to the first colon, one space after it dropped). */
export function readEvent(raw: string): WholeSseEvent {
  let event = "message";
  const data: string[] = [];
  let comment = false;
  for (const line of raw.split(/\r\n|\r|\n/)) {
    if (line === "") continue;
    if (line.startsWith(":")) {
      comment = true;
      continue;
    }
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") data.push(value);
    else if (field === "event") event = value;
  }
  return { event, data: data.length > 0 ? data.join("\n") : undefined, comment, raw };
}

/**
 * The whole events in `held + text` (`held` from the previous call, "" at first; `text` the next
 * piece, decoded with `stream: true`) and what is left of one still arriving, undefined when that is
 * longer than `maxHeld` characters. A blank line with no event before it comes out as an event of
 * its own, without data.
 */
export function splitSse(held: string, text: string, maxHeld: number): SseSplit {
  const events: WholeSseEvent[] = [];
  // `held` ends no event, so only its last two characters matter to where the next one ends: a CR at
  // its end may be half a CRLF, and the character before that CR says whether it ends a line or
  // starts one. They are taken with `slice` and `endsWith`, which leave a long held text as it is
  // where an index into it would copy it whole, piece after piece.
  const tail = held.slice(-2);
  const s = tail + text;
  // Where the event being read starts in `s`; undefined while it is the one `held` started.
  let start: number | undefined;
  const upTo = (end: number) => (start === undefined ? held + text.slice(0, end - tail.length) : s.slice(start, end));
  let i = held.endsWith("\r") ? tail.length - 1 : tail.length;
  // Where the line being read starts; -1 when it started before `i`, so a line end at `i` ends no event.
  let lineStart = i === 0 || s[i - 1] === "\n" || s[i - 1] === "\r" ? i : -1;
  const lineEnd = /[\r\n]/g;
  lineEnd.lastIndex = i;
  for (let m = lineEnd.exec(s); m; m = lineEnd.exec(s)) {
    i = m.index;
    // A CR at the very end may be the first half of a CRLF still in flight.
    if (s[i] === "\r" && i === s.length - 1) break;
    const end = s[i] === "\r" && s[i + 1] === "\n" ? i + 2 : i + 1;
    if (i === lineStart) {
      events.push(readEvent(upTo(end)));
      start = end;
    }
    lineStart = end;
    lineEnd.lastIndex = end;
  }
  const rest = upTo(s.length);
  return { events, held: rest.length > maxHeld ? undefined : rest };
}
