/**
 * How much memory a model needs to run (pure): its files plus the KV cache for the context it will
 * be given, with headroom for compute buffers. Capacity planning across the mesh compares this
 * with what each node offers.
 */
import type { GgufFacts } from "./gguf-info.ts";

/** Bytes a model needs to run: weights plus KV cache, with 10% headroom for compute buffers. */
export function modelNeedBytes(fileBytes: number, kvBytes: number, margin = 1.1): number {
  return Math.ceil((fileBytes + kvBytes) * margin);
}

/** KV cache bytes at f16 for a context: layers x context x (K + V widths) x 2 bytes. */
export function kvCacheBytes(layers: number, context: number, embd: number, heads: number, kvHeads: number): number {
  const kvWidth = (embd / heads) * kvHeads;
  return layers * context * kvWidth * 2 * 2;
}

/** A model's need from its size and GGUF facts; a header we could not read counts as no KV cache. */
export function needOf(sizeBytes: number, facts: GgufFacts | undefined, ctxSize: number): number {
  const { blockCount, embeddingLength, headCount, headCountKv } = facts ?? {};
  const kv = blockCount && embeddingLength && headCount ? kvCacheBytes(blockCount, ctxSize, embeddingLength, headCount, headCountKv ?? headCount) : 0;
  return modelNeedBytes(sizeBytes, kv);
}
