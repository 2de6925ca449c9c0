/**
 * How each dialect's stream ends when the server answering it is gone mid-answer (pure), and where
 * the last whole event of a stream's bytes ends, so a broken stream is never cut inside an event.
 * A client's SDK reads only its own dialect's error: the OpenAI SDKs an `error` object in a data
 * line; the Anthropic SDKs an `event: error` (an event without a name is skipped, and the stream
 * just stops); the Responses API an `error` event with a `type` of `error`.
 */

/** The SSE bytes that end `route`'s stream (a public `/v1` path) with `message`. */
export function brokenStreamEnding(route: string, message: string, code: string): string {
  if (route === "/v1/messages") {
    return `event: error\ndata: ${JSON.stringify({ type: "error", error: { type: "api_error", message } })}\n\n`;
  }
  if (route === "/v1/responses") {
    return `event: error\ndata: ${JSON.stringify({ type: "error", code, message, param: null })}\n\n`;
  }
  return `data: ${JSON.stringify({ error: { message, type: "service_unavailable", code } })}\n\n`;
}

/** Bytes an event may hold back before it is passed on unsplit anyway: a whole answer repeated in one final event fits. */
export const MAX_HELD_EVENT_BYTES = 16 * 1024 * 1024;

const LF = 10;
const CR = 13;

/**
 * Where the last complete event in `bytes` ends (the index just after its blank line), or 0 when
 * none ends in them (pure). SSE ends an event at an empty line: `\n\n`, `\r\n\r\n` or `\r\r`.
 */
export function endOfLastEvent(bytes: Uint8Array): number {
  for (let i = bytes.length - 1; i >= 1; i--) {
    const b = bytes[i]!;
    if (b !== LF && b !== CR) continue;
    const prev = bytes[i - 1]!;
    if (b === LF && prev === LF) return i + 1;
    if (b === CR && prev === CR) return i + 1;
    if (b === LF && prev === CR && i >= 3 && bytes[i - 2] === LF && bytes[i - 3] === CR) return i + 1;
  }
  return 0;
}
