/**
 * The test models: shapes of random-weight llama models, small enough for a 2-core CI machine.
 * `tiny` loads in well under a second; `embed` is tiny with mean pooling (an embedding model to
 * llama.cpp and to our model-type detection); `wide` has feed-forward tensors just over 10 MiB at
 * every weight type, the size above which llama.cpp's RPC client sends a hash instead of the bytes.
 * `rerank` is tiny with rank pooling: llama-server `--reranking` scores with it. `tools` is tiny
 * with a chat template that calls tools (`scripts/test-model/templates.ts`); `vision` is tiny, paired
 * with a projector (`scripts/test-model/projector.ts`) written beside it as `mmproj-<model>.gguf`.
 */
import { GgmlType, rowBytes } from "../../models/gguf-writer.ts";

export type PresetName = "tiny" | "embed" | "rerank" | "wide" | "tools" | "vision";
export type WeightType = "f32" | "q8_0";

export interface ModelShape {
  nEmbd: number;
  nLayer: number;
  nHead: number;
  nHeadKv: number;
  nFf: number;
  contextLength: number;
  /** llama.cpp `enum llama_pooling_type`: 1 = mean, 4 = rank. Absent for generative models. */
  pooling?: 1 | 4;
  /** The chat template in the GGUF: ChatML, or one that takes tools and writes tool calls. */
  template: ChatTemplateName;
}

export type ChatTemplateName = "chatml" | "tools";

export const PRESET_NAMES: readonly PresetName[] = ["tiny", "embed", "rerank", "wide", "tools", "vision"];
export const WEIGHT_TYPES: readonly WeightType[] = ["f32", "q8_0"];

export const ggmlTypeOf = (t: WeightType): GgmlType => (t === "f32" ? GgmlType.F32 : GgmlType.Q8_0);

/** The RPC hash cache threshold in llama.cpp (ggml-rpc.cpp, HASH_THRESHOLD). */
export const RPC_HASH_THRESHOLD = 10 * 1024 * 1024;

/** Smallest multiple of 256 rows that makes an n_embd-wide tensor exceed the threshold. */
function wideFeedForward(nEmbd: number, type: WeightType): number {
  const perRow = rowBytes(ggmlTypeOf(type), nEmbd);
  return Math.ceil((RPC_HASH_THRESHOLD + 1) / perRow / 256) * 256;
}

export function presetShape(preset: PresetName, type: WeightType): ModelShape {
  switch (preset) {
    case "tiny":
    case "vision":
      return { nEmbd: 64, nLayer: 4, nHead: 4, nHeadKv: 2, nFf: 128, contextLength: 2048, template: "chatml" };
    case "tools":
      return { nEmbd: 64, nLayer: 4, nHead: 4, nHeadKv: 2, nFf: 128, contextLength: 2048, template: "tools" };
    case "embed":
      return { nEmbd: 64, nLayer: 4, nHead: 4, nHeadKv: 4, nFf: 128, contextLength: 2048, pooling: 1, template: "chatml" };
    case "rerank":
      return { nEmbd: 64, nLayer: 4, nHead: 4, nHeadKv: 4, nFf: 128, contextLength: 2048, pooling: 4, template: "chatml" };
    case "wide":
      // Three layers, so a split over three devices gives each at least one hashed layer. Trained
      // to 8192 tokens because llama-server caps a slot at the training context, and
      // bench/kv-follow.ts reads 4k-token prompts. Four query heads share one KV head, as models
      // mostly do (grouped-query attention): a token's KV is 768 bytes, not 3 KiB, so a cache
      // fetched over the iroh 1.x connection (whose byte API moves a few MB/s on a loaded 2-core
      // machine) still beats reading the prompt again, as it does for real models over a LAN.
      return { nEmbd: 256, nLayer: 3, nHead: 4, nHeadKv: 1, nFf: wideFeedForward(256, type), contextLength: 8192, template: "chatml" };
  }
}
