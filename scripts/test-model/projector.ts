/**
 * Metadata and tensors of a random-weight vision projector (an `mmproj` GGUF) of LLaVA's `mlp`
 * type, as llama.cpp's clip.cpp loads it: a two-block CLIP ViT over a 48x48 image in 8x8 patches
 * (36 image tokens, no class token), then the two-layer MLP (mm.0, GELU, mm.2) into the text model's
 * width. `mlp` is the plainest projector clip.cpp runs with a llama-architecture text model: a
 * fixed-size square resize, standard ViT blocks, no merger, no special tokens around the image.
 * Names and ggml shapes follow clip-impl.h's TN_* names and models/llava.cpp's graph; every tensor
 * is f32 (the CPU backend runs them all, and it keeps the file byte-exact in any weight type).
 */
import { GgmlType, type MetadataValue, type TensorSpec } from "../../models/gguf-writer.ts";
import { encodeTensor } from "../../models/ggml-quant.ts";
import { randomValues } from "./random.ts";

export interface ProjectorShape {
  /** Side of the square image the encoder sees; any image is resized (padded) to it. */
  imageSize: number;
  patchSize: number;
  /** Width of the ViT. */
  nEmbd: number;
  nHead: number;
  nFf: number;
  /** ViT blocks. The llava graph runs all but the last (LLaVA reads the second-to-last layer's output). */
  nLayer: number;
  /** Width of the text model the MLP projects into (its n_embd). */
  textEmbd: number;
}

/** The projector paired with a text model `textEmbd` wide. */
export const projectorShape = (textEmbd: number): ProjectorShape => ({
  imageSize: 48,
  patchSize: 8,
  nEmbd: 64,
  nHead: 4,
  nFf: 128,
  nLayer: 2,
  textEmbd,
});

/** Image tokens one image becomes: one per patch of the resized square. */
export const imageTokens = (s: ProjectorShape): number => (s.imageSize / s.patchSize) ** 2;

/** CLIP's normalization constants (OpenAI CLIP ViT-L/14, as LLaVA's mmproj files carry them). */
const IMAGE_MEAN = [0.48145466, 0.4578275, 0.40821073];
const IMAGE_STD = [0.26862954, 0.26130258, 0.27577711];

export function projectorMetadata(name: string, shape: ProjectorShape, seed: number): Map<string, MetadataValue> {
  const m = new Map<string, MetadataValue>();
  const u32 = (k: string, v: number) => m.set(k, { type: "u32", value: v });
  m.set("general.architecture", { type: "string", value: "clip" });
  m.set("general.name", { type: "string", value: name });
  m.set("general.description", { type: "string", value: `random weights, seed ${seed}, made by mesh scripts/make-test-model.ts` });
  u32("general.file_type", 0);
  m.set("clip.projector_type", { type: "string", value: "mlp" });
  m.set("clip.has_vision_encoder", { type: "bool", value: true });
  u32("clip.vision.image_size", shape.imageSize);
  u32("clip.vision.patch_size", shape.patchSize);
  u32("clip.vision.embedding_length", shape.nEmbd);
  u32("clip.vision.feed_forward_length", shape.nFf);
  u32("clip.vision.projection_dim", shape.textEmbd);
  u32("clip.vision.block_count", shape.nLayer);
  u32("clip.vision.attention.head_count", shape.nHead);
  m.set("clip.vision.attention.layer_norm_epsilon", { type: "f32", value: 1e-5 });
  m.set("clip.vision.image_mean", { type: "f32[]", value: IMAGE_MEAN });
  m.set("clip.vision.image_std", { type: "f32[]", value: IMAGE_STD });
  return m;
}

export function projectorTensors(shape: ProjectorShape, seed: number): TensorSpec[] {
  const f32 = (name: string, dims: number[], values: () => Float32Array): TensorSpec => ({
    name,
    dims,
    type: GgmlType.F32,
    data: () => encodeTensor(values(), GgmlType.F32),
  });
  const count = (dims: number[]) => dims.reduce((a, b) => a * b, 1);
  const random = (name: string, dims: number[], scale: number) => f32(name, dims, () => randomValues(seed, name, count(dims), scale));
  /** A linear layer `cols` in, `rows` out: noise scaled by 1/sqrt(fan-in), and a zero bias. */
  const linear = (base: string, cols: number, rows: number): TensorSpec[] => [
    random(`${base}.weight`, [cols, rows], 1 / Math.sqrt(cols)),
    f32(`${base}.bias`, [rows], () => new Float32Array(rows)),
  ];
  /** A layer norm: weight ones, bias zeros. */
  const norm = (base: string, n: number): TensorSpec[] => [
    f32(`${base}.weight`, [n], () => new Float32Array(n).fill(1)),
    f32(`${base}.bias`, [n], () => new Float32Array(n)),
  ];
  const { nEmbd, patchSize: p } = shape;
  const tensors: TensorSpec[] = [
    // A conv2d kernel in ggml order: [kernel w, kernel h, input channels (RGB), output channels].
    random("v.patch_embd.weight", [p, p, 3, nEmbd], 1 / Math.sqrt(p * p * 3)),
    f32("v.patch_embd.bias", [nEmbd], () => new Float32Array(nEmbd)),
    random("v.position_embd.weight", [nEmbd, imageTokens(shape)], 0.02),
    ...norm("v.pre_ln", nEmbd),
  ];
  for (let i = 0; i < shape.nLayer; i++) {
    const b = `v.blk.${i}`;
    tensors.push(
      ...norm(`${b}.ln1`, nEmbd),
      ...linear(`${b}.attn_q`, nEmbd, nEmbd),
      ...linear(`${b}.attn_k`, nEmbd, nEmbd),
      ...linear(`${b}.attn_v`, nEmbd, nEmbd),
      ...linear(`${b}.attn_out`, nEmbd, nEmbd),
      ...norm(`${b}.ln2`, nEmbd),
      // up is n_embd in, n_ff out; clip.cpp swaps the two for old llava files when ffn_down's rows
      // are n_embd long, which n_ff != n_embd rules out.
      ...linear(`${b}.ffn_up`, nEmbd, shape.nFf),
      ...linear(`${b}.ffn_down`, shape.nFf, nEmbd),
    );
  }
  tensors.push(...linear("mm.0", nEmbd, shape.textEmbd), ...linear("mm.2", shape.textEmbd, shape.textEmbd));
  return tensors;
}
