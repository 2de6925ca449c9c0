/**
 * A model's KV cache as its GGUF says it must be (pure): how many layers, how wide each K and V
 * row is, and so the most bytes a slot file of so many tokens can take. A member's cache is held
 * to it: an offer larger than that is refused before a byte of it is written (a file with a
 * made-up layer, or rows of any size, could otherwise push this node's own conversations out of
 * its disk budget), and a received file whose layers, types or row sizes are not the model's is
 * never handed to llama-server.
 */
import type { GgufFacts } from "../models/gguf-info.ts";
import type { SlotLayout } from "./slot-layout.ts";

export interface KvShape {
  layers: number;
  /** Elements of one token's K (and V) row: the heads the KV cache keeps, times their width. */
  kvDim: number;
}

/** The shape from a model's GGUF facts; none when they do not say (then only the layout's own counts hold). */
export function kvShapeOf(facts: GgufFacts | undefined): KvShape | undefined {
  const layers = facts?.blockCount;
  const embd = facts?.embeddingLength;
  const heads = facts?.headCount;
  const kvHeads = facts?.headCountKv ?? heads;
  if (!layers || !embd || !heads || !kvHeads || embd % heads !== 0) return undefined;
  return { layers, kvDim: (embd / heads) * kvHeads };
}

/** ggml's types a KV cache is kept in: elements per block and bytes per block. */
const KV_TYPES: Readonly<Record<number, { els: number; bytes: number }>> = {
  0: { els: 1, bytes: 4 }, // f32
  1: { els: 1, bytes: 2 }, // f16
  30: { els: 1, bytes: 2 }, // bf16
  2: { els: 32, bytes: 18 }, // q4_0
  3: { els: 32, bytes: 20 }, // q4_1
  6: { els: 32, bytes: 22 }, // q5_0
  7: { els: 32, bytes: 24 }, // q5_1
  8: { els: 32, bytes: 34 }, // q8_0
  20: { els: 32, bytes: 18 }, // iq4_nl
};

/** Bytes of one row of `dim` elements of ggml type `type`; none for a type no KV cache is kept in. */
export function rowBytesOf(type: number, dim: number): number | undefined {
  const t = KV_TYPES[type];
  return t && dim % t.els === 0 ? (dim / t.els) * t.bytes : undefined;
}

/** Streams a slot file may list (most empty: one per other sequence of its server). */
const MAX_STREAMS_ALLOWED = 256;

/**
 * The most bytes a slot file of `tokens` tokens of this shape can take: its head and token area,
 * every stream's count, each cell's record, and K and V rows of f32 (the widest type) for every layer.
 */
export function maxSlotBytes(shape: KvShape, tokens: number): number {
  const head = 12 + 4 * (tokens + 4) + 4 + 4 * MAX_STREAMS_ALLOWED + 8;
  const perLayer = 2 * (16 + tokens * shape.kvDim * 4);
  return head + tokens * 12 + shape.layers * perLayer;
}

/**
 * Why a walked slot file is not one of this model's (pure): another number of layers, a type no KV
 * cache is kept in, or rows (or transposed runs) of another width. `typeAt` reads a section's type.
 */
export function shapeMismatch(layout: SlotLayout, shape: KvShape, typeAt: (headAt: number) => number): string | undefined {
  for (const stream of layout.streams) {
    if (stream.cells === 0) continue;
    if (stream.sections.length !== 2 * shape.layers) return `it holds ${stream.sections.length / 2} layers; the model has ${shape.layers}`;
    for (const section of stream.sections) {
      const type = typeAt(section.headAt);
      const expected = rowBytesOf(type, shape.kvDim);
      if (expected === undefined) return `a layer of type ${type}, which no KV cache of this model is kept in`;
      const width = section.transposed ? section.transposed.elBytes * section.transposed.embd : section.rowBytes;
      if (width !== expected) return `a layer's rows are ${width} bytes; the model's are ${expected}`;
    }
  }
  return undefined;
}

/** Bytes read at a time while scanning a file's values. */
const SCAN_CHUNK = 1 << 20;

/** ggml's q8_0: each block an f16 scale, then 32 quants ggml writes as round(x / (max|x| / 127)), so never -128. */
const Q8_0 = 8;
const Q8_0_NEVER = 0x80;

/**
 * Where a slot file's K/V values leave what their type holds (pure over its bytes): the first NaN
 * or infinity in an f32, f16 or bf16 layer, or in a quantized block's f16 scale, and a q8_0 quant
 * of -128, which ggml's own quantizing never writes; none when every value is in range. A state
 * llama-server restores is taken as it is: a member's NaN would poison every token that attends to it.
 */
export function outOfRange(src: { read(at: number, n: number): Uint8Array }, layout: SlotLayout, typeAt: (headAt: number) => number): string | undefined {
  for (const stream of layout.streams) {
    for (const [i, section] of stream.sections.entries()) {
      const type = typeAt(section.headAt);
      const bytes = section.transposed ? section.transposed.elBytes * section.transposed.embd * stream.cells : section.rowBytes * stream.cells;
      const t = KV_TYPES[type];
      if (!t) continue;
      const where = `layer ${i % (stream.sections.length / 2)} (${i < stream.sections.length / 2 ? "K" : "V"}) holds a value`;
      // Values of 4 or 2 bytes each; a quantized block's first 2 bytes are its f16 scale.
      const step = t.bytes;
      const width = t.els === 1 ? t.bytes : 2;
      const bad = type === 0 ? (v: number) => (v & 0x7f800000) === 0x7f800000 : type === 30 ? (v: number) => (v & 0x7f80) === 0x7f80 : (v: number) => (v & 0x7c00) === 0x7c00;
      for (let at = 0; at < bytes; ) {
        const n = Math.min(SCAN_CHUNK - (SCAN_CHUNK % step), bytes - at);
        const chunk = src.read(section.dataAt + at, n);
        const view = new DataView(chunk.buffer, chunk.byteOffset, chunk.length);
        for (let o = 0; o + width <= chunk.length; o += step) {
          const v = width === 4 ? view.getUint32(o, true) : view.getUint16(o, true);
          if (bad(v)) return `${where} that is not a number at byte ${section.dataAt + at + o}`;
          if (type === Q8_0) for (let q = o + 2; q < o + step && q < chunk.length; q++) if (chunk[q] === Q8_0_NEVER) return `${where} of -128, which ggml's q8_0 never holds, at byte ${section.dataAt + at + q}`;
        }
        at += n;
      }
    }
  }
  return undefined;
}
