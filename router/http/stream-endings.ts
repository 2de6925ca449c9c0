/**
 * How each dialect's stream ends when the server answering it is gone mid-answer (pure), and where
 * the last whole event of a stream's bytes ends, so a broken stream is never cut inside an event.
 * A client's SDK reads only its own dialect's error: the OpenAI SDKs an `error` object in a data
 * line; the Anthropic SDKs an `event: error` (an event without a name is skipped, and the stream
 * just stops). A Responses stream is a chat stream on its way (`responses-stream.ts` ends it).
 */

/** The SSE bytes that end `route`'s stream (a public `/v1` path) with `message`. */
export function brokenStreamEnding(route: string, message: string, code: string): string {
  if (route === "/v1/messages") {
    return `event: error\ndata: ${JSON.stringify({ type: "error", error: { type: "api_error", message } })}\n\n`;
  }
  return `data: ${JSON.stringify({ error: { message, type: "service_unavailable", code } })}\n\n`;
}

/** Bytes an event may hold back before it is passed on unsplit anyway: a whole answer repeated in one final event fits. */
export const MAX_HELD_EVENT_BYTES = 16 * 1024 * 1024;

const LF = 10;
const CR = 13;
const isLineEnd = (b: number | undefined) => b === LF || b === CR;

/**
 * Where the last complete event in `bytes` ends (the index just after its blank line), or 0 when
 * none ends in them (pure). SSE ends a line with LF, CRLF or CR, and an event with an empty line:
 * two line ends in a row, in any mix (`\n\n`, `\r\n\r\n`, `\r\r`, `\n\r\n`, `\r\n\n`, ...).
 */
export function endOfLastEvent(bytes: Uint8Array): number {
  for (let i = bytes.length - 1; i >= 1; i--) {
    const b = bytes[i]!;
    if (!isLineEnd(b)) continue;
    // A CR followed by LF is the CRLF the loop met at that LF.
    if (b === CR && bytes[i + 1] === LF) continue;
    const start = b === LF && bytes[i - 1] === CR ? i - 1 : i;
    if (start >= 1 && isLineEnd(bytes[start - 1])) return i + 1;
  }
  return 0;
}
