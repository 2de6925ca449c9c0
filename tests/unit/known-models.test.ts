import { describe, expect, test } from "bun:test";
import { findKnownModel, knownModels } from "../../models/known-models.ts";
import { defaultModelName, parseModelRef } from "../../models/model-ref.ts";
import { quantRank } from "../../models/hf-files.ts";

describe("the catalog of well-known models", () => {
  const models = knownModels();
  test("holds a dozen or so, ids unique", () => {
    expect(models.length).toBeGreaterThanOrEqual(12);
    expect(new Set(models.map((m) => m.id)).size).toBe(models.length);
  });
  test("has chat models and at least one embedding model", () => {
    expect(models.some((m) => /instruct|-it$/.test(m.id))).toBe(true);
    expect(models.some((m) => /embed|bge/.test(m.id))).toBe(true);
  });
  test.each(models.map((m) => [m.id, m] as const))("%s: a reference to its repo and quant, named as typed", (id, m) => {
    expect(parseModelRef(id)).toEqual({ kind: "hf", repo: m.repo, revision: "main", quant: m.quant, file: undefined });
    expect(defaultModelName(id)).toBe(id);
    expect(quantRank(m.quant)).toBeDefined();
    expect(m.sizeBytes).toBeGreaterThan(10_000_000);
  });
  test.each([
    ["qwen2.5-7b-instruct", "qwen2.5-7b-instruct"],
    ["QWEN2.5-7B-Instruct", "qwen2.5-7b-instruct"],
    [" nomic-embed-text-v1.5 ", "nomic-embed-text-v1.5"],
    ["no-such-model", undefined],
    ["bartowski/Qwen2.5-7B-Instruct-GGUF", undefined],
  ])("findKnownModel(%p) → %p", (id, expected) => expect(findKnownModel(id)?.id).toBe(expected));
});
