/**
 * Encodes f32 values as ggml tensor bytes: F32 as-is, F16, and Q8_0 (blocks of 32 values: an f16
 * scale d = max|x| / 127, then 32 int8 q = round(x / d)), matching ggml's reference quantizer.
 */
import { GgmlType } from "./gguf-writer.ts";

export function encodeTensor(values: Float32Array, type: GgmlType): Uint8Array {
  switch (type) {
    case GgmlType.F32:
      return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
    case GgmlType.F16: {
      const out = new Float16Array(values.length);
      out.set(values);
      return new Uint8Array(out.buffer);
    }
    case GgmlType.Q8_0:
      return quantizeQ8_0(values);
  }
}

function quantizeQ8_0(values: Float32Array): Uint8Array {
  if (values.length % 32 !== 0) throw new Error(`Q8_0 needs a multiple of 32 values, got ${values.length}`);
  const blocks = values.length / 32;
  const out = new Uint8Array(blocks * 34);
  const view = new DataView(out.buffer);
  const q = new Int8Array(out.buffer);
  for (let b = 0; b < blocks; b++) {
    const base = b * 32;
    let amax = 0;
    for (let i = 0; i < 32; i++) amax = Math.max(amax, Math.abs(values[base + i]!));
    const d = amax / 127;
    const id = d ? 1 / d : 0;
    view.setFloat16(b * 34, d, true);
    for (let i = 0; i < 32; i++) q[b * 34 + 2 + i] = Math.round(values[base + i]! * id);
  }
  return out;
}
