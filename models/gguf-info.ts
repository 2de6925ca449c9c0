/**
 * The facts mesh needs from a GGUF header, read with @huggingface/gguf (about 40 ms a file): what
 * the model is (architecture, pooling, whether it is a vision projector) and how big its context is.
 */
import { gguf } from "@huggingface/gguf";

export interface GgufFacts {
  architecture: string | undefined;
  /** `general.type`: "model", or "mmproj" for a vision/audio projector. */
  fileKind: string | undefined;
  poolingType: number | undefined;
  contextLength: number | undefined;
  blockCount: number | undefined;
  embeddingLength: number | undefined;
  /** Attention heads, and those for K/V (fewer with grouped-query attention): the KV cache's width. */
  headCount: number | undefined;
  headCountKv: number | undefined;
  name: string | undefined;
}

const num = (v: unknown): number | undefined => (typeof v === "number" ? v : typeof v === "bigint" ? Number(v) : undefined);
const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);

/** Pure: the facts from a parsed metadata record. */
export function factsFromMetadata(md: Record<string, unknown>): GgufFacts {
  const arch = str(md["general.architecture"]);
  const key = (k: string) => (arch ? md[`${arch}.${k}`] : undefined);
  return {
    architecture: arch,
    fileKind: str(md["general.type"]),
    poolingType: num(key("pooling_type")),
    contextLength: num(key("context_length")),
    blockCount: num(key("block_count")),
    embeddingLength: num(key("embedding_length")),
    headCount: num(key("attention.head_count")),
    headCountKv: num(key("attention.head_count_kv")) ?? num(key("attention.head_count")),
    name: str(md["general.name"]),
  };
}

export async function readGgufFacts(path: string): Promise<GgufFacts> {
  const { metadata } = await gguf(path, { allowLocalFile: true });
  return factsFromMetadata(metadata as Record<string, unknown>);
}
