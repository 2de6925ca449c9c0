/**
 * Writes GGUF v3 files: metadata key/values, a tensor table, then aligned tensor data streamed one
 * tensor at a time (so a file of hundreds of MB never sits in memory whole). Hand-written because
 * the GGUF libraries on npm only read; the format is small and specified in ggml's docs/gguf.md.
 */

export const GGUF_ALIGNMENT = 32;

/** ggml tensor types we write. Values are ggml's `enum ggml_type`. */
export const GgmlType = { F32: 0, F16: 1, Q8_0: 8 } as const;
export type GgmlType = (typeof GgmlType)[keyof typeof GgmlType];

/** Bytes of one row of `n` elements: Q8_0 packs 32 elements into an f16 scale plus 32 int8. */
export function rowBytes(type: GgmlType, n: number): number {
  switch (type) {
    case GgmlType.F32:
      return n * 4;
    case GgmlType.F16:
      return n * 2;
    case GgmlType.Q8_0:
      if (n % 32 !== 0) throw new Error(`Q8_0 rows must be a multiple of 32 elements, got ${n}`);
      return (n / 32) * 34;
  }
}

export type MetadataValue =
  | { type: "u16"; value: number }
  | { type: "u32"; value: number }
  | { type: "i32"; value: number }
  | { type: "f32"; value: number }
  | { type: "bool"; value: boolean }
  | { type: "string"; value: string }
  | { type: "string[]"; value: readonly string[] }
  | { type: "f32[]"; value: readonly number[] }
  | { type: "i32[]"; value: readonly number[] };

export interface TensorSpec {
  name: string;
  /** ggml order: dims[0] is the row length. */
  dims: readonly number[];
  type: GgmlType;
  /** Produces the tensor's bytes when the writer reaches it; must return exactly `tensorBytes(spec)`. */
  data: () => Uint8Array;
}

export function tensorBytes(t: Pick<TensorSpec, "dims" | "type">): number {
  const [row = 1, ...rest] = t.dims;
  return rowBytes(t.type, row) * rest.reduce((a, b) => a * b, 1);
}

const KV_TYPE = { u16: 2, u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9, u64: 10 } as const;

const align = (n: number) => Math.ceil(n / GGUF_ALIGNMENT) * GGUF_ALIGNMENT;

/** A growable little-endian byte buffer for the header. */
class ByteWriter {
  private buf = new Uint8Array(1 << 16);
  private view = new DataView(this.buf.buffer);
  length = 0;
  private static readonly utf8 = new TextEncoder();

  private reserve(n: number): void {
    if (this.length + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.length + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.length));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }
  u16(v: number): void {
    this.reserve(2);
    this.view.setUint16(this.length, v, true);
    this.length += 2;
  }
  u32(v: number): void {
    this.reserve(4);
    this.view.setUint32(this.length, v, true);
    this.length += 4;
  }
  i32(v: number): void {
    this.reserve(4);
    this.view.setInt32(this.length, v, true);
    this.length += 4;
  }
  u64(v: number): void {
    this.reserve(8);
    this.view.setBigUint64(this.length, BigInt(v), true);
    this.length += 8;
  }
  f32(v: number): void {
    this.reserve(4);
    this.view.setFloat32(this.length, v, true);
    this.length += 4;
  }
  u8(v: number): void {
    this.reserve(1);
    this.view.setUint8(this.length, v);
    this.length += 1;
  }
  string(s: string): void {
    const bytes = ByteWriter.utf8.encode(s);
    this.u64(bytes.length);
    this.reserve(bytes.length);
    this.buf.set(bytes, this.length);
    this.length += bytes.length;
  }
  padTo(n: number): void {
    this.reserve(n - this.length);
    this.buf.fill(0, this.length, n);
    this.length = n;
  }
  bytes(): Uint8Array {
    return this.buf.subarray(0, this.length);
  }
}

function writeValue(w: ByteWriter, v: MetadataValue): void {
  switch (v.type) {
    case "u16":
      w.u32(KV_TYPE.u16);
      return w.u16(v.value);
    case "u32":
      w.u32(KV_TYPE.u32);
      return w.u32(v.value);
    case "i32":
      w.u32(KV_TYPE.i32);
      return w.i32(v.value);
    case "f32":
      w.u32(KV_TYPE.f32);
      return w.f32(v.value);
    case "bool":
      w.u32(KV_TYPE.bool);
      return w.u8(v.value ? 1 : 0);
    case "string":
      w.u32(KV_TYPE.string);
      return w.string(v.value);
    case "string[]":
      w.u32(KV_TYPE.array);
      w.u32(KV_TYPE.string);
      w.u64(v.value.length);
      for (const s of v.value) w.string(s);
      return;
    case "f32[]":
      w.u32(KV_TYPE.array);
      w.u32(KV_TYPE.f32);
      w.u64(v.value.length);
      for (const x of v.value) w.f32(x);
      return;
    case "i32[]":
      w.u32(KV_TYPE.array);
      w.u32(KV_TYPE.i32);
      w.u64(v.value.length);
      for (const x of v.value) w.i32(x);
      return;
  }
}

/** The header: magic, counts, metadata, tensor table, padded to where the data starts. */
export function encodeGgufHeader(metadata: ReadonlyMap<string, MetadataValue>, tensors: readonly Omit<TensorSpec, "data">[]): Uint8Array {
  const w = new ByteWriter();
  w.u32(0x46554747); // "GGUF" read as a little-endian u32
  w.u32(3);
  w.u64(tensors.length);
  w.u64(metadata.size);
  for (const [key, value] of metadata) {
    w.string(key);
    writeValue(w, value);
  }
  let offset = 0;
  for (const t of tensors) {
    w.string(t.name);
    w.u32(t.dims.length);
    for (const d of t.dims) w.u64(d);
    w.u32(t.type);
    w.u64(offset);
    offset = align(offset + tensorBytes(t));
  }
  w.padTo(align(w.length));
  return w.bytes();
}

/** Writes the file; returns its size in bytes. */
export async function writeGguf(path: string, metadata: ReadonlyMap<string, MetadataValue>, tensors: readonly TensorSpec[]): Promise<number> {
  const sink = Bun.file(path).writer({ highWaterMark: 1 << 20 });
  const header = encodeGgufHeader(metadata, tensors);
  sink.write(header);
  let size = header.length;
  for (const t of tensors) {
    const data = t.data();
    const expected = tensorBytes(t);
    if (data.length !== expected) throw new Error(`tensor ${t.name}: produced ${data.length} bytes, expected ${expected}`);
    sink.write(data);
    const padding = align(data.length) - data.length;
    if (padding > 0) sink.write(new Uint8Array(padding));
    size += data.length + padding;
    await sink.flush();
  }
  await sink.end();
  return size;
}
