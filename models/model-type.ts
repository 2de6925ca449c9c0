/**
 * What kind of model a file is, which decides its pool slot and the flags its server gets.
 * Registry labels win; otherwise the GGUF says it: a pooling type means embeddings (rank pooling
 * means reranking), and encoder-only architectures are embedding models.
 */

export const MODEL_TYPES = ["llm", "embedding", "reranking", "audio", "image"] as const;
export type ModelType = (typeof MODEL_TYPES)[number];

/** llama.cpp `enum llama_pooling_type`. */
export const PoolingType = { NONE: 0, MEAN: 1, CLS: 2, LAST: 3, RANK: 4 } as const;
export const POOLING_NAMES: Record<number, string> = { 0: "none", 1: "mean", 2: "cls", 3: "last", 4: "rank" };

/** Architectures llama.cpp runs only as encoders: without a pooling type they still embed. */
const ENCODER_ARCHITECTURES = new Set(["bert", "nomic-bert", "nomic-bert-moe", "jina-bert-v2", "jina-bert-v3", "modern-bert", "neo-bert", "t5encoder"]);

const LABEL_TYPES: Record<string, ModelType> = {
  embedding: "embedding",
  embeddings: "embedding",
  reranking: "reranking",
  reranker: "reranking",
  audio: "audio",
  image: "image",
};

export interface TypeEvidence {
  labels: readonly string[];
  architecture: string | undefined;
  poolingType: number | undefined;
}

export function modelTypeOf(e: TypeEvidence): ModelType {
  for (const label of e.labels) {
    const t = LABEL_TYPES[label.toLowerCase()];
    if (t) return t;
  }
  if (e.poolingType === PoolingType.RANK) return "reranking";
  if (e.poolingType !== undefined && e.poolingType !== PoolingType.NONE) return "embedding";
  if (e.architecture && ENCODER_ARCHITECTURES.has(e.architecture)) return "embedding";
  return "llm";
}
