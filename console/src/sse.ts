/**
 * A server-sent-events parser (pure, incremental): bytes or text go in as they arrive, whole
 * events come out. It follows the SSE rules the page needs: lines end in LF, CRLF or CR (a CRLF
 * split across two chunks is one line end), `:` starts a comment, `data` lines join with `\n`, an
 * empty line dispatches an event that has data. Bytes are decoded as a stream, so a character
 * split between chunks is kept whole. Used instead of EventSource, which cannot send the API key.
 */

export interface SseMessage {
  /** The `event:` field; "message" when there was none. */
  event: string;
  data: string;
}

/** The most text one event may hold (its lines together); a bigger one is dropped, not buffered without end. */
export const SSE_MAX_EVENT_CHARS = 32 * 1024 * 1024;

export class SseParser {
  private readonly decoder = new TextDecoder();
  private partial = "";
  private afterCr = false;
  private event: string | undefined;
  private data: string[] = [];
  private size = 0;
  private oversized = false;

  /** Feeds the next piece of the stream; returns the events it completed, in order. */
  push(chunk: Uint8Array | string): SseMessage[] {
    const text = typeof chunk === "string" ? chunk : this.decoder.decode(chunk, { stream: true });
    const out: SseMessage[] = [];
    let i = 0;
    if (this.afterCr && text.startsWith("\n")) i = 1;
    this.afterCr = false;
    while (i < text.length) {
      const end = lineEnd(text, i);
      if (end === -1) {
        this.partial += text.slice(i);
        this.grow(text.length - i);
        break;
      }
      this.grow(end - i);
      const line = this.partial + text.slice(i, end);
      this.partial = "";
      this.line(line, out);
      i = end + 1;
      if (text[end] === "\r") {
        if (i === text.length) this.afterCr = true;
        else if (text[i] === "\n") i++;
      }
    }
    return out;
  }

  /** The end of the stream: a last event without its blank line is not dispatched (SSE). */
  end(): SseMessage[] {
    const out = this.push(this.decoder.decode());
    this.partial = "";
    this.reset();
    return out;
  }

  /** Counts what arrived since the last event, so a peer that never ends an event cannot fill memory. */
  private grow(chars: number): void {
    this.size += chars;
    if (this.size > SSE_MAX_EVENT_CHARS) {
      this.oversized = true;
      this.partial = "";
      this.data = [];
    }
  }

  private reset(): void {
    this.event = undefined;
    this.data = [];
    this.size = 0;
    this.oversized = false;
  }

  private line(line: string, out: SseMessage[]): void {
    if (line === "") {
      if (this.data.length > 0 && !this.oversized) out.push({ event: this.event ?? "message", data: this.data.join("\n") });
      this.reset();
      return;
    }
    if (this.oversized || line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") this.event = value;
    else if (field === "data") this.data.push(value);
  }
}

function lineEnd(text: string, from: number): number {
  const cr = text.indexOf("\r", from);
  const lf = text.indexOf("\n", from);
  if (cr === -1) return lf;
  if (lf === -1) return cr;
  return Math.min(cr, lf);
}

/**
 * Reads a response body event by event until it ends or `signal` aborts; `onActivity` hears every
 * chunk (comments included), so a caller can tell a quiet stream from a dead one.
 */
export async function readSseBody(
  body: ReadableStream<Uint8Array>,
  onEvent: (m: SseMessage) => void,
  onActivity?: () => void,
): Promise<void> {
  const parser = new SseParser();
  const reader = body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      onActivity?.();
      for (const m of parser.push(value)) onEvent(m);
    }
    for (const m of parser.end()) onEvent(m);
  } finally {
    reader.releaseLock();
  }
}
