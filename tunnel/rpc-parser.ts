/**
 * Follows llama.cpp RPC requests (`cmd u8 | size u64le | payload`) across any chunking of the
 * client-to-server byte stream (pure). Bytes of commands nobody asked for pass straight through
 * as views of the input, never copied or held; a command the caller wants to see or rewrite is
 * collected whole (only small ones are: HELLO, SET_TENSOR_HASH, REGISTER_PEER); a size beyond the
 * limit ends the stream with an error, since nothing sane follows it.
 */
import { HEADER_BYTES } from "./rpc-protocol.ts";

export type Piece =
  | { kind: "bytes"; bytes: Uint8Array }
  | { kind: "frame"; cmd: number; header: Uint8Array; payload: Uint8Array }
  | { kind: "error"; message: string };

export interface ParserOptions {
  /** Largest payload accepted; more means a broken or hostile stream. */
  maxPayload: number;
  /** Whether to collect this command whole (only asked once its header is complete). */
  capture: (cmd: number, size: number) => boolean;
}

/** Joins neighbouring views of the same buffer, so a command arrives downstream as one piece. */
function coalesce(pieces: Piece[]): Piece[] {
  const out: Piece[] = [];
  for (const p of pieces) {
    const last = out.at(-1);
    if (
      p.kind === "bytes" &&
      last?.kind === "bytes" &&
      last.bytes.buffer === p.bytes.buffer &&
      last.bytes.byteOffset + last.bytes.length === p.bytes.byteOffset
    ) {
      last.bytes = new Uint8Array(p.bytes.buffer, last.bytes.byteOffset, last.bytes.length + p.bytes.length);
    } else out.push(p);
  }
  return out;
}

export class RpcRequestParser {
  private readonly header = new Uint8Array(HEADER_BYTES);
  private headerFill = 0;
  /** Header bytes that arrived in earlier chunks (held until the header is complete). */
  private headerStartsInChunk = true;
  private passRemaining = 0;
  private collecting: { cmd: number; header: Uint8Array; payload: Uint8Array; fill: number } | undefined;
  private failed = false;
  /** Commands seen, for counters. */
  commands = 0;

  constructor(private readonly opts: ParserOptions) {}

  push(chunk: Uint8Array): Piece[] {
    if (this.failed) return [];
    const out: Piece[] = [];
    let i = 0;
    while (i < chunk.length) {
      if (this.passRemaining > 0) {
        const n = Math.min(this.passRemaining, chunk.length - i);
        out.push({ kind: "bytes", bytes: chunk.subarray(i, i + n) });
        this.passRemaining -= n;
        i += n;
        continue;
      }
      const c = this.collecting;
      if (c) {
        const n = Math.min(c.payload.length - c.fill, chunk.length - i);
        c.payload.set(chunk.subarray(i, i + n), c.fill);
        c.fill += n;
        i += n;
        if (c.fill === c.payload.length) {
          out.push({ kind: "frame", cmd: c.cmd, header: c.header, payload: c.payload });
          this.collecting = undefined;
        }
        continue;
      }
      if (this.headerFill === 0) this.headerStartsInChunk = true;
      const start = i;
      const n = Math.min(HEADER_BYTES - this.headerFill, chunk.length - i);
      this.header.set(chunk.subarray(i, i + n), this.headerFill);
      this.headerFill += n;
      i += n;
      if (this.headerFill < HEADER_BYTES) {
        this.headerStartsInChunk = false;
        break;
      }
      this.headerFill = 0;
      this.commands++;
      const cmd = this.header[0]!;
      const size = new DataView(this.header.buffer).getBigUint64(1, true);
      if (size > BigInt(this.opts.maxPayload)) {
        this.failed = true;
        out.push({ kind: "error", message: `RPC command ${cmd} declares a payload of ${size} bytes, over the ${this.opts.maxPayload} byte limit` });
        return coalesce(out);
      }
      const payloadSize = Number(size);
      if (this.opts.capture(cmd, payloadSize)) {
        this.collecting = { cmd, header: this.header.slice(), payload: new Uint8Array(payloadSize), fill: 0 };
        if (payloadSize === 0) {
          out.push({ kind: "frame", cmd, header: this.collecting.header, payload: this.collecting.payload });
          this.collecting = undefined;
        }
        continue;
      }
      // The header passes through: as a view when all of it is in this chunk, else as a copy.
      out.push({ kind: "bytes", bytes: this.headerStartsInChunk ? chunk.subarray(start, i) : this.header.slice() });
      this.passRemaining = payloadSize;
    }
    return coalesce(out);
  }

  /** True when the stream stopped at a command boundary (nothing half-read). */
  atBoundary(): boolean {
    return this.headerFill === 0 && this.passRemaining === 0 && !this.collecting;
  }
}
