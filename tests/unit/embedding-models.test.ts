/** Which models an embeddings request is refused for, and which models the refusal names instead. */
import { describe, expect, test } from "bun:test";
import { catalog, type NodeView } from "../../placement/catalog.ts";
import { embeddingsRefusal, embeddingsRefusalFrom } from "../../router/serving/embedding-models.ts";

describe("embeddingsRefusal", () => {
  test.each<[string, string | undefined, string[], string | undefined]>([
    ["an embedding model goes on", "embedding", ["e"], undefined],
    ["a kind nobody knows goes on (its server answers)", undefined, ["e"], undefined],
    ["a chat model: refused, naming the ones that embed", "llm", ["e1", "e2"], 'model "m" does not do embeddings (it is a llm model); models of the mesh that do: e1, e2'],
    ["a reranker: refused too", "reranking", ["e"], 'model "m" does not do embeddings (it is a reranking model); models of the mesh that do: e'],
    ["none in the mesh: says how to get one", "llm", [], 'model "m" does not do embeddings (it is a llm model); no model of the mesh does: add an embedding model (a GGUF with a pooling type, or one labelled "embedding" in models.json)'],
  ])("%s", (_, type, others, refusal) => expect(embeddingsRefusal("m", type, others)).toBe(refusal));
});

describe("embeddingsRefusalFrom: this node's models, then the mesh's catalog", () => {
  const local = [
    { name: "chat", type: "llm" },
    { name: "embed", type: "embedding" },
  ];
  const catalog = [
    { name: "chat", type: "embedding" },
    { name: "far-chat", type: "llm" },
    { name: "far-embed", type: "embedding" },
    { name: "old", type: undefined },
  ];
  test.each<[string, string, string | undefined]>([
    ["a local chat model: its own kind wins over a holder's claim", "chat", "models of the mesh that do: embed, far-embed"],
    ["a local chat model by its :latest name", "chat:latest", "models of the mesh that do: embed, far-embed"],
    ["a chat model only another node has", "far-chat", 'model "far-chat" does not do embeddings (it is a llm model)'],
    ["an embedding model on another node", "far-embed", undefined],
    ["a model whose holder says no kind", "old", undefined],
    ["a model nobody has: left to the usual not-found", "nowhere", undefined],
  ])("%s", (_, model, words) => {
    const out = embeddingsRefusalFrom(model, local, catalog);
    if (words === undefined) return expect(out).toBeUndefined();
    expect(out).toContain(words);
  });
});

test("the mesh's catalog carries each model's kind as a holder announces it, and the refusal reads it", () => {
  const view = (nodeId: string, models: { name: string; type?: string }[]): NodeView => ({
    nodeId,
    vramBytes: 1e9,
    modelsOnDisk: models.map((m) => ({ sizeBytes: 1, needBytes: 1, ...m })),
    assigned: undefined,
    ready: [],
    idle: [],
  });
  const entries = catalog([view("a", [{ name: "chat", type: "llm" }, { name: "old" }]), view("b", [{ name: "vec", type: "embedding" }])]);
  expect(entries.map((m) => [m.name, m.type])).toEqual([
    ["chat", "llm"],
    ["old", undefined],
    ["vec", "embedding"],
  ]);
  expect(embeddingsRefusalFrom("chat", [], entries)).toBe('model "chat" does not do embeddings (it is a llm model); models of the mesh that do: vec');
});

test("holders that disagree on a model's kind give it none: one member's word refuses nothing", () => {
  const view = (nodeId: string, type: string): NodeView => ({ nodeId, vramBytes: 1e9, modelsOnDisk: [{ name: "vec", sizeBytes: 1, needBytes: 1, type }], assigned: undefined, ready: [], idle: [] });
  const [vec] = catalog([view("a", "embedding"), view("z-liar", "llm")]);
  expect(vec!.type).toBeUndefined();
  expect(embeddingsRefusalFrom("vec", [], [vec!])).toBeUndefined();
});
