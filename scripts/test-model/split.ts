/**
 * A model cut into a llama.cpp split, as `llama-gguf-split` cuts one: the tensors are divided in
 * order among the shards; the first shard keeps every metadata key, the others carry only the
 * split keys (`split.no` u16, `split.count` u16, `split.tensors.count` i32, which all shards
 * have). llama.cpp loads it from the first shard and finds the others by their names,
 * `<stem>-0000k-of-0000N.gguf` beside it.
 */
import type { MetadataValue, TensorSpec } from "../../models/gguf-writer.ts";

export interface Shard {
  metadata: Map<string, MetadataValue>;
  tensors: TensorSpec[];
}

/** llama.cpp's split names count in five digits. */
export const MAX_SHARDS = 99_999;

export function splitModel(metadata: ReadonlyMap<string, MetadataValue>, tensors: readonly TensorSpec[], count: number): Shard[] {
  if (!Number.isInteger(count) || count < 2 || count > Math.min(MAX_SHARDS, tensors.length)) {
    throw new Error(`a split needs 2 to ${Math.min(MAX_SHARDS, tensors.length)} shards (one tensor each at least), got ${count}`);
  }
  const per = Math.ceil(tensors.length / count);
  return Array.from({ length: count }, (_, i) => {
    const keys = new Map<string, MetadataValue>(i === 0 ? metadata : []);
    keys.set("split.no", { type: "u16", value: i });
    keys.set("split.count", { type: "u16", value: count });
    keys.set("split.tensors.count", { type: "i32", value: tensors.length });
    // The last shards may come out empty when `per` rounds up: give each at least one tensor.
    const start = Math.min(i * per, tensors.length - (count - i));
    const end = i === count - 1 ? tensors.length : Math.min((i + 1) * per, tensors.length - (count - i - 1));
    return { metadata: keys, tensors: tensors.slice(start, end) };
  });
}

/** The file of shard `index` (0-based) of `count` for a model meant for `out` (`dir/m.gguf` → `dir/m-00001-of-00003.gguf`). */
export function shardPath(out: string, index: number, count: number): string {
  const pad = (n: number) => String(n).padStart(5, "0");
  return `${out.replace(/\.gguf$/i, "")}-${pad(index + 1)}-of-${pad(count)}.gguf`;
}
