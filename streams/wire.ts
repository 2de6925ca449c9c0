/**
 * How bytes on a mesh stream are laid out. The first byte of every bi-stream says what it carries;
 * control messages are a u32 big-endian length and that many bytes of UTF-8 JSON, capped so a
 * peer cannot make us buffer without bound.
 */
import type { RecvSide, SendSide } from "./stream.ts";

/** KV: a conversation's KV cache asked of the member that holds it (`kv/`). */
export const StreamKind = { CONTROL: 1, RPC: 2, HTTP: 3, MODEL: 4, KV: 5 } as const;
export type StreamKind = (typeof StreamKind)[keyof typeof StreamKind];

export const MAX_CONTROL_MESSAGE = 256 * 1024;

export class WireError extends Error {}

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

export function encodeFrame(message: unknown): Uint8Array {
  const body = encoder.encode(JSON.stringify(message));
  if (body.length > MAX_CONTROL_MESSAGE) throw new WireError(`control message of ${body.length} bytes is over the ${MAX_CONTROL_MESSAGE} byte cap`);
  const frame = new Uint8Array(4 + body.length);
  new DataView(frame.buffer).setUint32(0, body.length);
  frame.set(body, 4);
  return frame;
}

/** Parses one frame's payload; a frame that is not JSON is the peer's fault. */
export function decodePayload(payload: Uint8Array): unknown {
  let text: string;
  try {
    text = decoder.decode(payload);
  } catch {
    throw new WireError("control message is not UTF-8");
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new WireError("control message is not JSON");
  }
}

/**
 * Fills `buf` from `from` on. A stream that finishes first sent half a message, which is the
 * peer's fault (a WireError); a reset or a lost connection still fails as the transport's error.
 */
async function readFull(recv: RecvSide, buf: Uint8Array, from: number, what: string): Promise<void> {
  for (let at = from; at < buf.length; ) {
    const n = await recv.read(buf.subarray(at));
    if (n === null) throw new WireError(`the stream ended inside a control message's ${what} (${at} of ${buf.length} bytes)`);
    at += n;
  }
}

/** Reads the next frame's JSON, or null when the stream ended cleanly between frames. */
export async function readFrame(recv: RecvSide): Promise<unknown | null> {
  const header = new Uint8Array(4);
  const first = await recv.read(header);
  if (first === null) return null;
  await readFull(recv, header, first, "length");
  const length = new DataView(header.buffer).getUint32(0);
  if (length > MAX_CONTROL_MESSAGE) throw new WireError(`control message length ${length} is over the ${MAX_CONTROL_MESSAGE} byte cap`);
  const payload = new Uint8Array(length);
  await readFull(recv, payload, 0, "body");
  return decodePayload(payload);
}

/**
 * Reads frames from one stream, asking the transport for as much as it has at each read: one
 * crossing into the transport per frame or fewer, where `readFrame` makes two (the length, then
 * the body). A control stream carries a message from every peer every heartbeat, so the crossings
 * are most of what an idle node spends per peer. Only for a stream nothing else reads after it.
 */
export class FrameReader {
  private buf: Uint8Array;
  private start = 0;
  private end = 0;

  constructor(
    private readonly recv: RecvSide,
    private readonly chunk = 16 * 1024,
  ) {
    this.buf = new Uint8Array(chunk);
  }

  /** The next frame's JSON and its size on the wire, or null when the stream ended cleanly between frames. */
  async next(): Promise<{ message: unknown; bytes: number } | null> {
    if (!(await this.fill(4, "length"))) return null;
    const length = new DataView(this.buf.buffer, this.buf.byteOffset + this.start, 4).getUint32(0);
    if (length > MAX_CONTROL_MESSAGE) throw new WireError(`control message length ${length} is over the ${MAX_CONTROL_MESSAGE} byte cap`);
    await this.fill(4 + length, "body");
    const payload = this.buf.subarray(this.start + 4, this.start + 4 + length);
    const message = decodePayload(payload);
    this.start += 4 + length;
    if (this.start === this.end) {
      // A large frame grew the buffer: it goes back to its usual size once read, so every peer's holds little.
      if (this.buf.length > this.chunk) this.buf = new Uint8Array(this.chunk);
      this.start = this.end = 0;
    }
    return { message, bytes: 4 + length };
  }

  /** Holds `n` unread bytes; false when the stream ended before any byte of a frame. */
  private async fill(n: number, what: string): Promise<boolean> {
    while (this.end - this.start < n) {
      if (this.buf.length - this.start < n || this.end === this.buf.length) this.makeRoom(n);
      const got = await this.recv.read(this.buf.subarray(this.end));
      if (got === null) {
        if (this.end === this.start && what === "length") return false;
        throw new WireError(`the stream ended inside a control message's ${what} (${this.end - this.start} of ${n} bytes)`);
      }
      this.end += got;
    }
    return true;
  }

  /** Moves the unread bytes to the front, growing the buffer when a frame needs more than it holds. */
  private makeRoom(n: number): void {
    if (n <= this.buf.length) this.buf.copyWithin(0, this.start, this.end);
    else {
      const grown = new Uint8Array(n);
      grown.set(this.buf.subarray(this.start, this.end));
      this.buf = grown;
    }
    this.end -= this.start;
    this.start = 0;
  }
}

export async function writeFrame(send: SendSide, message: unknown): Promise<void> {
  await send.writeAll(encodeFrame(message));
}
