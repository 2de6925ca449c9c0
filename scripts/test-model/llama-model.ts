/**
 * Metadata and tensors of a random-weight model of llama architecture, as llama.cpp's loader
 * expects them (names and ggml shapes from its `LLM_ARCH_LLAMA` tensor list). Norm weights are ones
 * and stay f32; every matrix is uniform noise scaled by 1/sqrt(fan-in) so activations stay finite.
 */
import { GgmlType, type MetadataValue, type TensorSpec } from "../../models/gguf-writer.ts";
import { encodeTensor } from "../../models/ggml-quant.ts";
import { ggmlTypeOf, type ModelShape, type PresetName, type WeightType } from "./presets.ts";
import { randomValues } from "./random.ts";
import { CHAT_TEMPLATES } from "./templates.ts";
import { buildVocab } from "./vocab.ts";

/** llama.cpp `enum llama_ftype`: 0 = all f32, 7 = mostly Q8_0. */
const FILE_TYPE: Record<WeightType, number> = { f32: 0, q8_0: 7 };

export function llamaMetadata(name: string, shape: ModelShape, type: WeightType, seed: number): Map<string, MetadataValue> {
  const vocab = buildVocab();
  const m = new Map<string, MetadataValue>();
  const u32 = (k: string, v: number) => m.set(k, { type: "u32", value: v });
  m.set("general.architecture", { type: "string", value: "llama" });
  m.set("general.name", { type: "string", value: name });
  m.set("general.description", { type: "string", value: `random weights, seed ${seed}, made by mesh scripts/make-test-model.ts` });
  u32("general.file_type", FILE_TYPE[type]);
  u32("general.quantization_version", 2);
  u32("llama.context_length", shape.contextLength);
  u32("llama.embedding_length", shape.nEmbd);
  u32("llama.block_count", shape.nLayer);
  u32("llama.feed_forward_length", shape.nFf);
  u32("llama.attention.head_count", shape.nHead);
  u32("llama.attention.head_count_kv", shape.nHeadKv);
  u32("llama.rope.dimension_count", shape.nEmbd / shape.nHead);
  u32("llama.vocab_size", vocab.tokens.length);
  m.set("llama.rope.freq_base", { type: "f32", value: 10000 });
  m.set("llama.attention.layer_norm_rms_epsilon", { type: "f32", value: 1e-5 });
  if (shape.pooling !== undefined) u32("llama.pooling_type", shape.pooling);
  m.set("tokenizer.ggml.model", { type: "string", value: "llama" });
  m.set("tokenizer.ggml.tokens", { type: "string[]", value: vocab.tokens });
  m.set("tokenizer.ggml.scores", { type: "f32[]", value: vocab.scores });
  m.set("tokenizer.ggml.token_type", { type: "i32[]", value: vocab.types });
  u32("tokenizer.ggml.bos_token_id", vocab.bos);
  u32("tokenizer.ggml.eos_token_id", vocab.imEnd);
  u32("tokenizer.ggml.unknown_token_id", vocab.unk);
  m.set("tokenizer.ggml.add_bos_token", { type: "bool", value: true });
  m.set("tokenizer.ggml.add_eos_token", { type: "bool", value: false });
  m.set("tokenizer.chat_template", { type: "string", value: CHAT_TEMPLATES[shape.template] });
  return m;
}

export function llamaTensors(shape: ModelShape, type: WeightType, seed: number): TensorSpec[] {
  const nVocab = buildVocab().tokens.length;
  const headDim = shape.nEmbd / shape.nHead;
  const nEmbdKv = headDim * shape.nHeadKv;
  const weight = ggmlTypeOf(type);
  const matrix = (name: string, cols: number, rows: number, scale = 1 / Math.sqrt(cols)): TensorSpec => ({
    name,
    dims: [cols, rows],
    type: weight,
    data: () => encodeTensor(randomValues(seed, name, cols * rows, scale), weight),
  });
  const norm = (name: string): TensorSpec => ({
    name,
    dims: [shape.nEmbd],
    type: GgmlType.F32,
    data: () => encodeTensor(new Float32Array(shape.nEmbd).fill(1), GgmlType.F32),
  });
  const tensors: TensorSpec[] = [matrix("token_embd.weight", shape.nEmbd, nVocab, 1), norm("output_norm.weight")];
  tensors.push(matrix("output.weight", shape.nEmbd, nVocab));
  for (let i = 0; i < shape.nLayer; i++) {
    const b = `blk.${i}`;
    tensors.push(
      norm(`${b}.attn_norm.weight`),
      matrix(`${b}.attn_q.weight`, shape.nEmbd, shape.nEmbd),
      matrix(`${b}.attn_k.weight`, shape.nEmbd, nEmbdKv),
      matrix(`${b}.attn_v.weight`, shape.nEmbd, nEmbdKv),
      matrix(`${b}.attn_output.weight`, shape.nEmbd, shape.nEmbd),
      norm(`${b}.ffn_norm.weight`),
      matrix(`${b}.ffn_gate.weight`, shape.nEmbd, shape.nFf),
      matrix(`${b}.ffn_up.weight`, shape.nEmbd, shape.nFf),
      matrix(`${b}.ffn_down.weight`, shape.nFf, shape.nEmbd),
    );
  }
  return tensors;
}

export const testModelName = (preset: PresetName, type: WeightType) => `${preset}-${type}`;
