/**
 * Metadata and tensors of a random-weight model of llama architecture, as llama.cpp's loader
 * expects them (names and ggml shapes from its `LLM_ARCH_LLAMA` tensor list). Norm weights are ones
 * and stay f32; every matrix is uniform noise scaled by 1/sqrt(fan-in) so activations stay finite.
 * The `tools` model also has its tool-call markers in its vocabulary and a few programmed bigrams
 * (`programToolCalls`), so that offered tools, it calls one and stops.
 */
import { GgmlType, type MetadataValue, type TensorSpec } from "../../models/gguf-writer.ts";
import { encodeTensor } from "../../models/ggml-quant.ts";
import { ggmlTypeOf, type ModelShape, type PresetName, type WeightType } from "./presets.ts";
import { randomValues } from "./random.ts";
import { CHAT_TEMPLATES } from "./templates.ts";
import { buildVocab, TOOL_CALL_TOKENS, type Vocab } from "./vocab.ts";

/** The vocabulary of a model of this shape: the tools model's has the tool-call markers at the end. */
export const vocabOf = (shape: ModelShape): Vocab => buildVocab(shape.template === "tools" ? TOOL_CALL_TOKENS : []);

/** llama.cpp `enum llama_ftype`: 0 = all f32, 7 = mostly Q8_0. */
const FILE_TYPE: Record<WeightType, number> = { f32: 0, q8_0: 7 };

export function llamaMetadata(name: string, shape: ModelShape, type: WeightType, seed: number): Map<string, MetadataValue> {
  const vocab = vocabOf(shape);
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
  // SentencePiece puts a space before text that follows a control token ("<|im_start|>" then
  // " assistant") unless told not to. llama-server feeds the tokens of the generation prompt
  // "<|im_start|>assistant\n" into a tool-call grammar (and a json_schema one) that begins with that
  // text, and " assistant" does not match it: the request fails with "Failed to initialize samplers".
  // Only the tools model goes without it, so the other models keep their bytes.
  if (shape.template === "tools") m.set("tokenizer.ggml.add_space_prefix", { type: "bool", value: false });
  m.set("tokenizer.chat_template", { type: "string", value: CHAT_TEMPLATES[shape.template] });
  return m;
}

export function llamaTensors(shape: ModelShape, type: WeightType, seed: number): TensorSpec[] {
  const vocab = vocabOf(shape);
  const nVocab = vocab.tokens.length;
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
  if (shape.template === "tools") {
    const [embd, , output] = tensors as [TensorSpec, TensorSpec, TensorSpec];
    const values = (name: string, scale: number) => randomValues(seed, name, shape.nEmbd * nVocab, scale);
    let programmed: { embd: Float32Array; output: Float32Array } | undefined;
    const program = () => (programmed ??= programToolCalls(vocab, shape.nEmbd, values("token_embd.weight", 1), values("output.weight", 1 / Math.sqrt(shape.nEmbd))));
    embd.data = () => encodeTensor(program().embd, weight);
    output.data = () => encodeTensor(program().output, weight);
  }
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

/** How much larger than a random row a source token's embedding is: it outweighs what the layers add. */
const SOURCE_EMBD_SCALE = 64;

/**
 * The programmed bigrams of the tools model: after the source token, its targets score highest, in
 * this order (a weight of 1 gives a logit of about 8 where the source is the current token; a random
 * row gives about 0.6 in either direction, and at most about 2 over the whole vocabulary). "\n" is
 * the byte token <0x0A>, the last token of the generation prompt "<|im_start|>assistant\n".
 * With a tool-call grammar, where only some tokens may come, this writes one call,
 * `<tool_call>{"name":"get_weather","arguments":{"city":"paris"}}</tool_call>` (54 tokens with the
 * end of turn), with no whitespace in the JSON: the grammar allows some between every two items, but
 * the punctuation that may come next always wins. The enum value, "paris" or "london", is the random
 * weights' choice. Then it ends the turn. Without a grammar (tool_choice "none", no tools) the same
 * bigrams write `<tool_call>{"}</tool_call>` as text and end the turn. The template's call has no
 * newline after "<tool_call>" because of this: "\n" would have to lead both to "<tool_call>" and to
 * "{", and without a grammar the model would write "<tool_call>\n" forever.
 */
const TOOL_CALL_BIGRAMS: readonly (readonly [string, readonly (readonly [string, number])[]])[] = [
  ["\n", [["<tool_call>", 1]]],
  ["<tool_call>", [["{", 1]]],
  ["{", [['"', 1]]],
  ['"', [["}", 1], [":", 0.8], [",", 0.8]]],
  [":", [['"', 1], ["{", 0.8]]],
  [",", [['"', 1]]],
  ["}", [["</tool_call>", 1], ["}", 0.8]]],
  ["</tool_call>", [["<|im_end|>", 1]]],
];

/**
 * Programs the bigrams of TOOL_CALL_BIGRAMS into random weights, so that the model, offered tools,
 * calls one and stops. llama.cpp's llama runs no scale on embeddings and normalizes (RMS) every
 * layer's input, so what the layers add to the residual stays about the size of a random embedding
 * row. A source token's row made SOURCE_EMBD_SCALE times larger dominates the final hidden state at
 * its position, which the output norm turns into that row's direction (times sqrt(n_embd)). Each
 * target's output row becomes the weighted sum of its sources' unit directions (random directions in
 * 64 dimensions are near orthogonal), so its logit after a source is about 8 times the weight. At
 * other positions the hidden state is as random as before and these rows score like random ones.
 * A single-character source has a byte token twin (<0x22> for '"') that the grammar may pick for
 * the same text: the twin gets the same embedding. Everything derives from the seed's random rows.
 */
function programToolCalls(vocab: Vocab, nEmbd: number, embd: Float32Array, output: Float32Array): { embd: Float32Array; output: Float32Array } {
  const id = (text: string): number => {
    const i = vocab.tokens.indexOf(text === "\n" ? "<0x0A>" : text);
    if (i < 0) throw new Error(`no token ${JSON.stringify(text)} in the vocabulary`);
    return i;
  };
  const row = (m: Float32Array, i: number) => m.subarray(i * nEmbd, (i + 1) * nEmbd);
  const direction = new Map<string, Float32Array>();
  for (const [source] of TOOL_CALL_BIGRAMS) {
    const e = row(embd, id(source));
    const norm = Math.hypot(...e);
    direction.set(source, e.map((x) => x / norm));
  }
  for (const target of new Set(TOOL_CALL_BIGRAMS.flatMap(([, targets]) => targets.map(([t]) => t)))) row(output, id(target)).fill(0);
  for (const [source, targets] of TOOL_CALL_BIGRAMS) {
    const u = direction.get(source)!;
    for (const [target, weight] of targets) {
      const out = row(output, id(target));
      for (let k = 0; k < nEmbd; k++) out[k] = out[k]! + weight * u[k]!;
    }
  }
  for (const [source] of TOOL_CALL_BIGRAMS) {
    const e = row(embd, id(source));
    for (let k = 0; k < nEmbd; k++) e[k] = e[k]! * SOURCE_EMBD_SCALE;
    if (source.length === 1 && source !== "\n") row(embd, id(`<0x${source.charCodeAt(0).toString(16).toUpperCase()}>`)).set(e);
  }
  return { embd, output };
}

export const testModelName = (preset: PresetName, type: WeightType) => `${preset}-${type}`;
