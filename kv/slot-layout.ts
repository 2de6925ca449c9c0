/**
 * The layout of a slot file llama-server writes (`POST /slots/N?action=save`), walked from end to
 * end without reading its KV (pure, over any `ByteSource`). For this llama.cpp line
 * (`llama_state_seq_save_file`, `llama_kv_cache::state_write`, `server_tokens::serialize`):
 *
 *   u32 magic 'ggsq' | u32 version | u32 n | i32[n] token area | KV state
 *   token area: -1 | 1 (its version) | u32 count | i32 tokens[count] | u32 media chunks (0: text)
 *   KV state:   u32 n_stream, then per stream u32 cells and, when cells > 0:
 *               cells × (i32 pos | u32 n_seq_id = 1 | i32 seq_id)
 *               u32 v_trans | u32 n_layer
 *               n_layer × (i32 k_type | u64 row bytes | cells rows)
 *               n_layer × (i32 v_type | u64 row bytes | cells rows)                    v_trans = 0
 *               n_layer × (i32 v_type | u32 el bytes | u32 n_embd | n_embd × cells els)  v_trans = 1
 *
 * Two uses. A file a member sends is data: it is handed to llama-server (which aborts on a state
 * that ends early rather than refusing it) only when every count in it adds up to its exact size
 * and its tokens are the asker's own. And the node that holds a conversation hands a member only
 * the blocks of it the member proved it has (`prefix-chain.ts`): `trimmed` is the same file cut
 * to its first `m` tokens, as byte ranges of the saved one and a few rewritten counts, so nothing
 * past what was proved leaves the node. Files this walk does not follow (media, a model whose
 * cells carry more than a position, a sequence whose positions are not 0..n-1) are not shared.
 */
import { readSync } from "node:fs";
import { readSlotFileHead, SLOT_FILE_HEAD_BYTES, SLOT_FILE_MAGIC } from "../pool/slot-file.ts";

/** Random access to a file's bytes (a file on disk, or bytes in memory in a test). */
export interface ByteSource {
  readonly size: number;
  /** `n` bytes at `at` (fewer only past the end). */
  read(at: number, n: number): Uint8Array;
}

/** `server_tokens`' marker and version: a token area in the framing this walk knows. */
const TOKEN_NULL = -1;
const TOKENS_STATE_VERSION = 1;
/** Bounds past which a count is not one llama.cpp wrote. */
export const MAX_CELLS = 1 << 20;
const MAX_STREAMS = 4096;
const MAX_LAYERS = 4096;
const MAX_ROW_BYTES = 1 << 24;
const MAX_EL_BYTES = 16;
const MAX_EMBD = 1 << 18;
/** Bytes of one cell's record: pos, n_seq_id (1), seq_id. */
const CELL_BYTES = 12;

/** A stretch of the source, or bytes written anew. */
export type Piece = { at: number; bytes: number } | Uint8Array;

interface Section {
  /** Where its head (type and sizes) starts, and the head's length. */
  headAt: number;
  headBytes: number;
  /** Where its data starts. */
  dataAt: number;
  /** Rows (one per cell): bytes per row; transposed: elements per cell, `embd` runs of `cells` each. */
  rowBytes: number;
  transposed?: { elBytes: number; embd: number };
}

interface StreamLayout {
  /** Where its cell count is. */
  countAt: number;
  cells: number;
  /** Where its cell records start (cells > 0), and its v_trans / n_layer pair. */
  metaAt: number;
  layersAt: number;
  sections: Section[];
}

export interface SlotLayout {
  version: number;
  /** The conversation's tokens, in order. */
  tokens: Int32Array;
  /** Where the KV state starts (its stream count). */
  stateAt: number;
  streams: StreamLayout[];
}

export class SlotLayoutError extends Error {}

class Reader {
  constructor(
    private readonly src: ByteSource,
    public at: number,
  ) {}
  private view(n: number): DataView {
    if (this.at + n > this.src.size) throw new SlotLayoutError(`the file ends at byte ${this.src.size}, inside a field at ${this.at}`);
    const b = this.src.read(this.at, n);
    if (b.length < n) throw new SlotLayoutError(`the file ends inside a field at ${this.at}`);
    this.at += n;
    return new DataView(b.buffer, b.byteOffset, n);
  }
  u32 = () => this.view(4).getUint32(0, true);
  i32 = () => this.view(4).getInt32(0, true);
  u64(): number {
    const v = this.view(8).getBigUint64(0, true);
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new SlotLayoutError(`a size of ${v} bytes`);
    return Number(v);
  }
  skip(n: number): void {
    if (this.at + n > this.src.size) throw new SlotLayoutError(`the file ends at byte ${this.src.size}, ${this.at + n - this.src.size} bytes short of its KV data`);
    this.at += n;
  }
}

function inRange(value: number, min: number, max: number, what: string): number {
  if (!Number.isInteger(value) || value < min || value > max) throw new SlotLayoutError(`${what} is ${value} (expected ${min}..${max})`);
  return value;
}

/** The walk of a whole slot file; throws `SlotLayoutError` on anything that does not add up. */
export function slotLayout(src: ByteSource): SlotLayout {
  const head = readSlotFileHead(src.read(0, SLOT_FILE_HEAD_BYTES), src.size);
  if ("error" in head) throw new SlotLayoutError(head.error);
  const { version } = head;
  const areaLength = inRange(head.tokens, 5, MAX_CELLS + 4, "the token area's length");
  const tokens = tokenArea(src.read(SLOT_FILE_HEAD_BYTES, areaLength * 4), areaLength);
  const r = new Reader(src, head.tokenEnd);
  const stateAt = r.at;
  const nStream = inRange(r.u32(), 1, MAX_STREAMS, "the stream count");
  const streams: StreamLayout[] = [];
  for (let s = 0; s < nStream; s++) {
    const countAt = r.at;
    const cells = inRange(r.u32(), 0, MAX_CELLS, "a stream's cell count");
    if (cells === 0) {
      streams.push({ countAt, cells, metaAt: r.at, layersAt: r.at, sections: [] });
      continue;
    }
    if (cells !== tokens.length) throw new SlotLayoutError(`a stream holds ${cells} cells for ${tokens.length} tokens`);
    const metaAt = r.at;
    cellRecords(src, metaAt, cells);
    r.skip(cells * CELL_BYTES);
    const layersAt = r.at;
    const vTrans = inRange(r.u32(), 0, 1, "v_trans");
    const nLayer = inRange(r.u32(), 1, MAX_LAYERS, "the layer count");
    const sections: Section[] = [];
    const rows = () => {
      const headAt = r.at;
      inRange(r.i32(), 0, 1024, "a tensor type");
      const rowBytes = inRange(r.u64(), 1, MAX_ROW_BYTES, "a row's bytes");
      const dataAt = r.at;
      r.skip(cells * rowBytes);
      sections.push({ headAt, headBytes: 12, dataAt, rowBytes });
    };
    for (let l = 0; l < nLayer; l++) rows();
    for (let l = 0; l < nLayer; l++) {
      if (vTrans === 0) {
        rows();
        continue;
      }
      const headAt = r.at;
      inRange(r.i32(), 0, 1024, "a tensor type");
      const elBytes = inRange(r.u32(), 1, MAX_EL_BYTES, "an element's bytes");
      const embd = inRange(r.u32(), 1, MAX_EMBD, "a value row's width");
      const dataAt = r.at;
      r.skip(embd * cells * elBytes);
      sections.push({ headAt, headBytes: 12, dataAt, rowBytes: elBytes, transposed: { elBytes, embd } });
    }
    streams.push({ countAt, cells, metaAt, layersAt, sections });
  }
  if (r.at !== src.size) throw new SlotLayoutError(`${src.size - r.at} bytes follow the KV state`);
  if (streams.filter((s) => s.cells > 0).length !== 1) throw new SlotLayoutError("the state holds no sequence, or more than one stream of it");
  return { version, tokens, stateAt, streams };
}

/** The tokens of a text conversation's token area; anything else (media, an older framing) throws. */
function tokenArea(bytes: Uint8Array, length: number): Int32Array {
  if (bytes.length !== length * 4) throw new SlotLayoutError("the file ends inside its tokens");
  const area = new Int32Array(bytes.slice().buffer);
  if (area[0] !== TOKEN_NULL || area[1] !== TOKENS_STATE_VERSION) throw new SlotLayoutError("the token area is not in the framing this node reads");
  const count = area[2]!;
  if (count < 1 || count + 4 !== length) throw new SlotLayoutError(`the token area says ${count} tokens in ${length - 4} places`);
  if (area[3 + count] !== 0) throw new SlotLayoutError("the conversation holds media");
  const tokens = area.slice(3, 3 + count);
  if (tokens.some((t) => t < 0)) throw new SlotLayoutError("a token id below 0");
  return tokens;
}

/** Cells 0..n-1 at positions 0..n-1, each of one sequence: the only shape that cuts cleanly. */
function cellRecords(src: ByteSource, at: number, cells: number): void {
  const bytes = src.read(at, cells * CELL_BYTES);
  if (bytes.length !== cells * CELL_BYTES) throw new SlotLayoutError("the file ends inside its cells");
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
  for (let i = 0; i < cells; i++) {
    if (v.getInt32(i * CELL_BYTES, true) !== i) throw new SlotLayoutError(`cell ${i} is not at position ${i}`);
    if (v.getUint32(i * CELL_BYTES + 4, true) !== 1) throw new SlotLayoutError(`cell ${i} is not of one sequence`);
  }
}

const u32 = (...values: number[]) => {
  const out = new Uint8Array(values.length * 4);
  const v = new DataView(out.buffer);
  values.forEach((x, i) => v.setUint32(i * 4, x >>> 0, true));
  return out;
};

/**
 * The same file cut to its first `m` tokens and cells (1 <= m <= its tokens): the pieces to send,
 * in order, and their total size. The counts are written anew; everything else is the saved bytes.
 */
export function trimmed(layout: SlotLayout, m: number): { pieces: Piece[]; bytes: number } {
  if (!Number.isInteger(m) || m < 1 || m > layout.tokens.length) throw new SlotLayoutError(`cannot cut ${layout.tokens.length} tokens to ${m}`);
  const pieces: Piece[] = [];
  const area = new Int32Array(m + 4);
  area.set([TOKEN_NULL, TOKENS_STATE_VERSION, m], 0);
  area.set(layout.tokens.subarray(0, m), 3);
  area[m + 3] = 0;
  pieces.push(u32(SLOT_FILE_MAGIC, layout.version, m + 4), new Uint8Array(area.buffer), u32(layout.streams.length));
  for (const s of layout.streams) {
    if (s.cells === 0) {
      pieces.push(u32(0));
      continue;
    }
    pieces.push(u32(m), { at: s.metaAt, bytes: m * CELL_BYTES }, { at: s.layersAt, bytes: 8 });
    for (const sec of s.sections) {
      pieces.push({ at: sec.headAt, bytes: sec.headBytes });
      if (!sec.transposed) pieces.push({ at: sec.dataAt, bytes: m * sec.rowBytes });
      else for (let j = 0; j < sec.transposed.embd; j++) pieces.push({ at: sec.dataAt + j * s.cells * sec.transposed.elBytes, bytes: m * sec.transposed.elBytes });
    }
  }
  const merged = mergeRanges(pieces);
  return { pieces: merged, bytes: merged.reduce((n, p) => n + (p instanceof Uint8Array ? p.length : p.bytes), 0) };
}

/** Source ranges that follow each other on disk become one (a whole file cut to its length is a few reads). */
function mergeRanges(pieces: Piece[]): Piece[] {
  const out: Piece[] = [];
  for (const p of pieces) {
    const last = out[out.length - 1];
    if (!(p instanceof Uint8Array) && last && !(last instanceof Uint8Array) && last.at + last.bytes === p.at) out[out.length - 1] = { at: last.at, bytes: last.bytes + p.bytes };
    else out.push(p);
  }
  return out;
}

/** A `ByteSource` over bytes in memory. */
export const bytesSource = (bytes: Uint8Array): ByteSource => ({ size: bytes.length, read: (at, n) => bytes.subarray(at, Math.min(bytes.length, at + n)) });

/** The bytes the pieces make, from `src` (small files: tests and the holder's hash pass read ranges in turn). */
export function* pieceBytes(src: ByteSource, pieces: readonly Piece[], chunk = 1 << 20): Generator<Uint8Array> {
  for (const p of pieces) {
    if (p instanceof Uint8Array) {
      yield p;
      continue;
    }
    for (let at = p.at; at < p.at + p.bytes; at += chunk) yield src.read(at, Math.min(chunk, p.at + p.bytes - at));
  }
}

/** A `ByteSource` over an open file (`fd`), read as it is walked; the file stays what it was while the fd is open. */
export function fileSource(fd: number, size: number): ByteSource {
  return {
    size,
    read(at, n) {
      const out = new Uint8Array(Math.max(0, Math.min(n, size - at)));
      let got = 0;
      while (got < out.length) {
        const r = readSync(fd, out, got, out.length - got, at + got);
        if (r <= 0) break;
        got += r;
      }
      return out.subarray(0, got);
    },
  };
}
