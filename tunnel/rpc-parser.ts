/**
 * Follows llama.cpp RPC requests (`cmd u8 | size u64le | payload`) across any chunking of the
 * client-to-server byte stream (pure). Every header is checked before any byte of its command is
 * passed on; one that fails ends the stream with an error, since nothing sane follows it. Bytes of
 * commands nobody asked for pass straight through as views of the input, never copied or held; a
 * command the caller wants to rewrite is collected whole, and one it only wants to read is
 * collected, shown to it, and passed on as bytes (only small ones are collected: HELLO,
 * SET_TENSOR_HASH, REGISTER_PEER, ALLOC_BUFFER).
 */
import { HEADER_BYTES } from "./rpc-protocol.ts";

export type Piece =
  | { kind: "bytes"; bytes: Uint8Array }
  | { kind: "frame"; cmd: number; header: Uint8Array; payload: Uint8Array }
  | { kind: "error"; message: string };

export interface ParserOptions {
  /** Why a command declaring `size` payload bytes may not pass (undefined: it may). */
  check: (cmd: number, size: bigint) => string | undefined;
  /** Whether to collect this command whole, to rewrite it (asked once its header passed the check). */
  capture: (cmd: number, size: number) => boolean;
  /** Whether to collect this command whole, only to read it; `observed` sees it before anything after it is checked. */
  observes?: (cmd: number) => boolean;
  observed?: (cmd: number, payload: Uint8Array) => void;
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

interface Collecting {
  cmd: number;
  header: Uint8Array;
  payload: Uint8Array;
  fill: number;
  /** Emitted as a frame to rewrite; otherwise only read, and emitted as bytes. */
  rewrite: boolean;
}

export class RpcRequestParser {
  private readonly header = new Uint8Array(HEADER_BYTES);
  private headerFill = 0;
  /** Header bytes that arrived in earlier chunks (held until the header is complete). */
  private headerStartsInChunk = true;
  private passRemaining = 0;
  private collecting: Collecting | undefined;
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
        if (c.fill === c.payload.length) this.collected(c, out);
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
      // Nothing of this command has been passed on yet: its header is held until here.
      const refused = this.opts.check(cmd, size);
      if (refused !== undefined) {
        this.failed = true;
        out.push({ kind: "error", message: refused });
        return coalesce(out);
      }
      const payloadSize = Number(size);
      const rewrite = this.opts.capture(cmd, payloadSize);
      if (rewrite || this.opts.observes?.(cmd)) {
        const c: Collecting = { cmd, header: this.header.slice(), payload: new Uint8Array(payloadSize), fill: 0, rewrite };
        this.collecting = c;
        if (payloadSize === 0) this.collected(c, out);
        continue;
      }
      // The header passes through: as a view when all of it is in this chunk, else as a copy.
      out.push({ kind: "bytes", bytes: this.headerStartsInChunk ? chunk.subarray(start, i) : this.header.slice() });
      this.passRemaining = payloadSize;
    }
    return coalesce(out);
  }

  private collected(c: Collecting, out: Piece[]): void {
    this.collecting = undefined;
    if (this.opts.observes?.(c.cmd)) this.opts.observed?.(c.cmd, c.payload);
    if (c.rewrite) return void out.push({ kind: "frame", cmd: c.cmd, header: c.header, payload: c.payload });
    const bytes = new Uint8Array(c.header.length + c.payload.length);
    bytes.set(c.header, 0);
    bytes.set(c.payload, c.header.length);
    out.push({ kind: "bytes", bytes });
  }

  /** True when the stream stopped at a command boundary (nothing half-read). */
  atBoundary(): boolean {
    return this.headerFill === 0 && this.passRemaining === 0 && !this.collecting;
  }
}
