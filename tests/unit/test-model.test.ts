import { afterAll, describe, expect, test } from "bun:test";
import { gguf } from "@huggingface/gguf";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { tensorBytes } from "../../models/gguf-writer.ts";
import { makeTestModel, projectorPath } from "../../scripts/make-test-model.ts";
import { llamaMetadata, llamaTensors, vocabOf } from "../../scripts/test-model/llama-model.ts";
import { imageTokens, projectorShape } from "../../scripts/test-model/projector.ts";
import { PRESET_NAMES, presetShape, RPC_HASH_THRESHOLD, WEIGHT_TYPES } from "../../scripts/test-model/presets.ts";
import { buildVocab, TOOL_CALL_TOKENS } from "../../scripts/test-model/vocab.ts";

const dir = mkdtempSync(join(tmpdir(), "mesh-test-model-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test("the same seed gives the same bytes; another seed gives other weights", async () => {
  const [a, b, c] = ["a", "b", "c"].map((n) => join(dir, `${n}.gguf`)) as [string, string, string];
  await makeTestModel({ preset: "tiny", type: "q8_0", seed: 7, out: a });
  await makeTestModel({ preset: "tiny", type: "q8_0", seed: 7, out: b });
  await makeTestModel({ preset: "tiny", type: "q8_0", seed: 8, out: c });
  const hash = (p: string) => Bun.hash(readFileSync(p));
  expect(hash(a)).toBe(hash(b));
  expect(hash(a)).not.toBe(hash(c));
});

describe("presets", () => {
  const cases = PRESET_NAMES.flatMap((p) => WEIGHT_TYPES.map((t) => [p, t] as const));
  test.each(cases)("%s %s: shapes llama.cpp accepts", (preset, type) => {
    const s = presetShape(preset, type);
    expect(s.nEmbd % s.nHead).toBe(0);
    expect(s.nHead % s.nHeadKv).toBe(0);
    expect(s.nEmbd % 32).toBe(0);
    expect(s.nFf % 32).toBe(0);
  });
  test.each(WEIGHT_TYPES)("wide %s: every feed-forward tensor exceeds the RPC hash threshold", (type) => {
    const big = llamaTensors(presetShape("wide", type), type, 1).filter((t) => t.name.includes("ffn_") && !t.name.includes("norm"));
    expect(big.length).toBeGreaterThan(0);
    for (const t of big) expect(tensorBytes(t)).toBeGreaterThan(RPC_HASH_THRESHOLD);
  });
  test.each([
    ["embed", 1],
    ["rerank", 4],
    ["tiny", undefined],
  ] as const)("%s has pooling type %p", async (preset, pooling) => {
    const path = join(dir, `${preset}.gguf`);
    await makeTestModel({ preset, type: "f32", out: path });
    const md = (await gguf(path, { allowLocalFile: true })).metadata as Record<string, unknown>;
    expect(md["llama.pooling_type"]).toBe(pooling);
  });
});

test("the vocabulary has unique tokens, 256 byte tokens and every prefix of every word", () => {
  const v = buildVocab();
  expect(new Set(v.tokens).size).toBe(v.tokens.length);
  expect(v.tokens.filter((t) => /^<0x[0-9A-F]{2}>$/.test(t))).toHaveLength(256);
  const set = new Set(v.tokens);
  for (const t of v.tokens.filter((t) => t.startsWith("\u2581") && t.length > 2)) expect(set.has(t.slice(0, -1))).toBe(true);
  expect([v.bos, v.eos, v.unk, v.imStart, v.imEnd].every((id) => id >= 0 && id < v.tokens.length)).toBe(true);
});

test("the tools model's vocabulary is the default one and the tool-call markers after it; only it drops the space prefix", () => {
  const base = buildVocab();
  const tools = vocabOf(presetShape("tools", "f32"));
  expect(tools.tokens).toEqual([...base.tokens, "<tool_call>", "</tool_call>"]);
  expect(tools.types).toEqual([...base.types, 4, 4]);
  expect(tools.scores.slice(0, base.scores.length)).toEqual(base.scores);
  expect(vocabOf(presetShape("tiny", "f32"))).toEqual(base);
  expect(TOOL_CALL_TOKENS).toEqual(["<tool_call>", "</tool_call>"]);
  const md = (preset: "tiny" | "tools") => llamaMetadata("m", presetShape(preset, "f32"), "f32", 1);
  expect(md("tiny").has("tokenizer.ggml.add_space_prefix")).toBe(false);
  expect(md("tools").get("tokenizer.ggml.add_space_prefix")).toEqual({ type: "bool", value: false });
  expect(md("tools").get("llama.vocab_size")).toEqual({ type: "u32", value: base.tokens.length + 2 });
});

test("vision writes a LLaVA mlp projector beside the model, projecting into the model's width", async () => {
  const out = join(dir, "vision-f32.gguf");
  const size = await makeTestModel({ preset: "vision", type: "f32", out });
  const proj = projectorPath(out);
  expect(proj).toBe(join(dir, "mmproj-vision-f32.gguf"));
  expect(size).toBe(statSync(out).size + statSync(proj).size);
  expect(statSync(proj).size).toBeLessThan(1024 * 1024);
  const { metadata, tensorInfos } = await gguf(proj, { allowLocalFile: true });
  const md = metadata as Record<string, unknown>;
  expect(md["clip.projector_type"]).toBe("mlp");
  expect(md["clip.has_vision_encoder"]).toBe(true);
  expect(md["clip.vision.image_size"]).toBe(48);
  expect(md["clip.vision.patch_size"]).toBe(8);
  expect(imageTokens(projectorShape(64))).toBe(36);
  const dims = Object.fromEntries(tensorInfos.map((t) => [t.name, t.shape.map(Number)]));
  expect(dims["v.patch_embd.weight"]).toEqual([8, 8, 3, 64]);
  expect(dims["v.position_embd.weight"]).toEqual([64, 36]);
  expect(dims["v.blk.1.ffn_down.weight"]).toEqual([128, 64]);
  // mm.2's rows are the text model's n_embd: llama.cpp refuses a projector whose width differs.
  expect(dims["mm.2.weight"]).toEqual([64, presetShape("vision", "f32").nEmbd]);
  expect(tensorInfos.every((t) => t.dtype === 0)).toBe(true);
});
