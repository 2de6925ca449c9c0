/**
 * The facts mesh needs from a GGUF header, read with @huggingface/gguf (about 40 ms a file): what
 * the model is (architecture, pooling, whether it is a vision projector), how big its context is,
 * how its weights are quantized (`general.file_type`, named as llama.cpp names it), and how many
 * weights the file holds (the sum over its tensors' shapes; Ollama shows it as the parameter size).
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
  /** `general.file_type`: llama.cpp's `llama_ftype` (see `quantName`). */
  fileType: number | undefined;
  /** Weights in this file (one shard's, for a split model); none when its tensor shapes do not add up. */
  parameterCount?: number;
  /**
   * Its chat template (`tokenizer.chat_template`) takes tools. Before a server runs it, the template's
   * text is all there is to go on (llama-server's own caps come from rendering it): one that never
   * names `tools` cannot put them in a prompt, as Ollama reads its templates too.
   */
  templateTakesTools?: boolean;
}

/**
 * llama.cpp's `llama_ftype` (include/llama.h) as data: the value `general.file_type` holds -> the
 * quant name users know from file names and `llama-quantize`. Retired values stay: old files carry them.
 */
const FILE_TYPES: Readonly<Record<number, string>> = {
  0: "F32",
  1: "F16",
  2: "Q4_0",
  3: "Q4_1",
  4: "Q4_1_SOME_F16",
  5: "Q4_2",
  6: "Q4_3",
  7: "Q8_0",
  8: "Q5_0",
  9: "Q5_1",
  10: "Q2_K",
  11: "Q3_K_S",
  12: "Q3_K_M",
  13: "Q3_K_L",
  14: "Q4_K_S",
  15: "Q4_K_M",
  16: "Q5_K_S",
  17: "Q5_K_M",
  18: "Q6_K",
  19: "IQ2_XXS",
  20: "IQ2_XS",
  21: "Q2_K_S",
  22: "IQ3_XS",
  23: "IQ3_XXS",
  24: "IQ1_S",
  25: "IQ4_NL",
  26: "IQ3_S",
  27: "IQ3_M",
  28: "IQ2_S",
  29: "IQ2_M",
  30: "IQ4_XS",
  31: "IQ1_M",
  32: "BF16",
  33: "Q4_0_4_4",
  34: "Q4_0_4_8",
  35: "Q4_0_8_8",
  36: "TQ1_0",
  37: "TQ2_0",
  38: "MXFP4_MOE",
  39: "NVFP4",
  40: "Q1_0",
  41: "Q2_0",
};

/** Pure: the quant name of a `general.file_type` value; undefined when absent or unknown to this table. */
export function quantName(fileType: number | undefined): string | undefined {
  return fileType === undefined || !Object.hasOwn(FILE_TYPES, fileType) ? undefined : FILE_TYPES[fileType];
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
    fileType: num(md["general.file_type"]),
    ...(templateTakesTools(md["tokenizer.chat_template"]) ? { templateTakesTools: true } : {}),
  };
}

/** Pure: a chat template that takes tools names them (`tools`, as Jinja templates of tool-calling models all do). */
export const templateTakesTools = (template: unknown): boolean => typeof template === "string" && /\btools\b/.test(template);

/** Pure: the weights in tensors of these shapes; undefined when the sum is no safe whole number. */
export function parameterCountOf(tensors: readonly { shape: readonly (bigint | number)[] }[]): number | undefined {
  let total = 0n;
  for (const t of tensors) total += t.shape.reduce<bigint>((n, d) => n * BigInt(d), 1n);
  return total <= BigInt(Number.MAX_SAFE_INTEGER) && total >= 0n ? Number(total) : undefined;
}

export async function readGgufFacts(path: string): Promise<GgufFacts> {
  const { metadata, tensorInfos } = await gguf(path, { allowLocalFile: true });
  const parameterCount = parameterCountOf(tensorInfos);
  return { ...factsFromMetadata(metadata as Record<string, unknown>), ...(parameterCount !== undefined ? { parameterCount } : {}) };
}
