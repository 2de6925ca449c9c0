import { describe, expect, test } from "bun:test";
import { factsFromMetadata } from "../../models/gguf-info.ts";
import { groupModelFiles, type ModelFiles } from "../../models/model-files.ts";
import { modelTypeOf, type ModelType, type TypeEvidence } from "../../models/model-type.ts";
import { Registry } from "../../models/registry.ts";

describe("modelTypeOf", () => {
  const ev = (over: Partial<TypeEvidence>): TypeEvidence => ({ labels: [], architecture: "llama", poolingType: undefined, ...over });
  const cases: [string, TypeEvidence, ModelType][] = [
    ["a plain llama is an llm", ev({}), "llm"],
    ["mean pooling is an embedding model", ev({ poolingType: 1 }), "embedding"],
    ["cls pooling is an embedding model", ev({ poolingType: 2 }), "embedding"],
    ["rank pooling is a reranker", ev({ poolingType: 4 }), "reranking"],
    ["pooling none is an llm", ev({ poolingType: 0 }), "llm"],
    ["a bert without pooling embeds", ev({ architecture: "bert" }), "embedding"],
    ["label embedding wins over metadata", ev({ labels: ["embeddings"] }), "embedding"],
    ["label reranking", ev({ labels: ["reranking"], poolingType: 1 }), "reranking"],
    ["label audio", ev({ labels: ["audio"] }), "audio"],
    ["label image", ev({ labels: ["Image"] }), "image"],
    ["unknown labels are ignored", ev({ labels: ["vision", "tools"] }), "llm"],
    ["no header at all is an llm", ev({ architecture: undefined }), "llm"],
  ];
  test.each(cases)("%s", (_, evidence, type) => expect(modelTypeOf(evidence)).toBe(type));
});

describe("groupModelFiles", () => {
  const m = (name: string, path: string, over: Partial<ModelFiles> = {}): ModelFiles => ({
    name,
    path,
    files: [path],
    mmproj: undefined,
    missingShards: [],
    ...over,
  });
  const cases: [string, string[], ModelFiles[]][] = [
    ["one file", ["qwen.gguf"], [m("qwen", "qwen.gguf")]],
    ["not gguf is ignored", ["readme.md", "a.GGUF"], [m("a", "a.GGUF")]],
    [
      "split shards are one model named without the suffix",
      ["big-00002-of-00002.gguf", "big-00001-of-00002.gguf"],
      [m("big", "big-00001-of-00002.gguf", { files: ["big-00001-of-00002.gguf", "big-00002-of-00002.gguf"] })],
    ],
    [
      "a missing shard is reported",
      ["big-00001-of-00003.gguf", "big-00003-of-00003.gguf"],
      [m("big", "big-00001-of-00003.gguf", { files: ["big-00001-of-00003.gguf", "big-00003-of-00003.gguf"], missingShards: [2] })],
    ],
    ["a projector pairs with the one model beside it", ["v/llava.gguf", "v/mmproj-f16.gguf"], [m("llava", "v/llava.gguf", { mmproj: "v/mmproj-f16.gguf" })]],
    [
      "with two models, the projector named after one pairs with it",
      ["gemma.gguf", "qwen.gguf", "mmproj-qwen.gguf"],
      [m("gemma", "gemma.gguf"), m("qwen", "qwen.gguf", { mmproj: "mmproj-qwen.gguf" })],
    ],
    ["a projector alone is no model", ["mmproj.gguf"], []],
    ["a projector in another folder does not pair", ["a/x.gguf", "b/mmproj.gguf"], [m("x", "a/x.gguf")]],
    ["same name in two folders: both qualified", ["a/m.gguf", "b/m.gguf"], [m("a/m", "a/m.gguf"), m("b/m", "b/m.gguf")]],
  ];
  test.each(cases)("%s", (_, paths, models) => expect(groupModelFiles(paths)).toEqual(models));
});

test("GGUF facts come from the architecture's own keys", () => {
  const facts = factsFromMetadata({
    "general.architecture": "llama",
    "general.name": "x",
    "llama.pooling_type": 1,
    "llama.context_length": 2048,
    "llama.block_count": 4n,
    "bert.pooling_type": 2,
  });
  expect(facts).toEqual({ architecture: "llama", fileKind: undefined, poolingType: 1, contextLength: 2048, blockCount: 4, embeddingLength: undefined, headCount: undefined, headCountKv: undefined, name: "x", fileType: undefined });
});

describe("registry", () => {
  test("entries get defaults", () => {
    expect(Registry.parse({ e: { file: "e.gguf", labels: ["embedding"] } })).toEqual({ e: { file: "e.gguf", labels: ["embedding"], recipe: "llamacpp" } });
  });
  test.each([
    [{ e: { labels: [] } }, "file"],
    [{ e: { file: "e.gguf", recipe: "onnx" } }, "recipe"],
    [{ e: { file: "e.gguf", ctx_size: -1 } }, "ctx_size"],
    [{ e: { file: "e.gguf", source: "not a url" } }, "source"],
  ])("%p is refused naming %s", (json, field) => {
    const r = Registry.safeParse(json);
    expect(r.success).toBe(false);
    expect(JSON.stringify(r.error?.issues)).toContain(field);
  });
});
