/**
 * How Ollama's routes describe models of other nodes (pure): a model's family and weights go from
 * its GGUF header into the announcement (bounded claims, junk dropped on its own), through the
 * catalog (one holder's word, the same on every node), into `/api/ps`, `/api/show` and `/api/tags`.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { catalog, type CatalogModel, type NodeView } from "../../placement/catalog.ts";
import { ModelOnDiskSchema } from "../../mesh/messages.ts";
import { parameterCountOf } from "../../models/gguf-info.ts";
import type { ModelInfo } from "../../models/model-store.ts";
import { diskFields, nodeView, type ModelFields } from "../../node/model-fields.ts";
import { detailsOf, meshPsEntries, parameterSize, psExpiries, psPeers, remoteShowAnswer, remoteTagsEntry } from "../../router/dialects/ollama-models.ts";

const dir = mkdtempSync(join(tmpdir(), "mesh-ollama-mesh-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test.each<[number | undefined, string]>([
  [undefined, ""],
  [-1, ""],
  [0, "0"],
  [999, "999"],
  [1000, "1.00K"],
  [22_700, "22.7K"],
  [494_032_768, "494M"],
  [1_235_814_400, "1.24B"],
  [8_030_261_248, "8.03B"],
  [70_553_706_496, "70.6B"],
  [1.2e12, "1.20T"],
])("parameterSize(%p) = %p, as Ollama writes it", (count, size) => expect(parameterSize(count)).toBe(size));

test.each<[string, { shape: bigint[] }[], number | undefined]>([
  ["no tensors", [], 0],
  ["a vector and a matrix", [{ shape: [64n] }, { shape: [64n, 128n] }], 64 + 64 * 128],
  ["beyond a safe number", [{ shape: [2n ** 40n, 2n ** 20n] }], undefined],
])("parameterCountOf: %s", (_, tensors, count) => expect(parameterCountOf(tensors)).toBe(count));

describe("a model's family and weights as announced", () => {
  const base = { name: "m", size: 1, need: 1 };
  test.each<[string, Record<string, unknown>, { family?: string; parameters?: number }]>([
    ["both", { family: "llama", parameters: 1234 }, { family: "llama", parameters: 1234 }],
    ["a family with digits, a dash and a dot", { family: "jina-bert-v2.1" }, { family: "jina-bert-v2.1" }],
    ["a new line in the family is dropped, the model kept", { family: "llama\nx" }, {}],
    ["markup is dropped", { family: "<b>llama</b>" }, {}],
    ["a family over 64 characters", { family: "a".repeat(65) }, {}],
    ["weights beyond 10^15", { parameters: 1e16 }, {}],
    ["weights not whole", { parameters: 1.5 }, {}],
    ["negative weights", { parameters: -1 }, {}],
    ["weights as text", { parameters: "8B" }, {}],
  ])("%s", (_, claim, kept) => {
    const parsed = ModelOnDiskSchema.parse({ ...base, ...claim });
    expect({ family: parsed.family, parameters: parsed.parameters }).toEqual({ family: undefined, parameters: undefined, ...kept });
    expect(parsed.name).toBe("m");
  });
});

/** A node's announced fields for models on its disk, as `diskFields` makes them from the store. */
function announced(models: { name: string; arch?: string; parameters?: number; quant?: string }[]): ModelFields {
  const infos = models.map((m) => {
    const path = join(dir, `${m.name}.gguf`);
    writeFileSync(path, "x");
    const info = { name: m.name, path, files: [path], mmproj: undefined, labels: [], sizeBytes: 1000, type: "llm", facts: m.arch === undefined ? undefined : { architecture: m.arch }, problem: undefined, quant: m.quant, ...(m.parameters !== undefined ? { parameters: m.parameters } : {}) };
    return info as unknown as ModelInfo;
  });
  const disk = diskFields(infos, new Map(), () => 2000);
  // As a peer reads it: through the schema.
  const modelsOnDisk = disk.modelsOnDisk.map((d) => ModelOnDiskSchema.parse(d));
  return { ...disk, modelsOnDisk, serving: [], assigned: undefined, hosting: false, idle: [], fetches: true, rpcProtocol: "3", keepsLayouts: true, hostsOnlyGetters: true, prefersSeeingHosts: true, replicating: [], takesReplicas: false } as ModelFields;
}

const view = (id: string, fields: ModelFields, over: Partial<NodeView> = {}): NodeView => ({ ...nodeView(id, 8e9, fields), ...over });

describe("the catalog tells what a holder announced, the same on every node", () => {
  const a = announced([{ name: "chat", arch: "llama", parameters: 8_030_261_248, quant: "Q4_K_M" }]);
  const b = announced([{ name: "chat", arch: "qwen2", parameters: 7 }]);

  test("from the node's store to the catalog", () => {
    const [chat] = catalog([view("a", a)]);
    expect(chat).toMatchObject({ name: "chat", family: "llama", parameters: 8_030_261_248, quant: "Q4_K_M" });
  });

  test("holders that disagree: the first by id, whichever node works it out", () => {
    const one = catalog([view("b", b), view("a", a)])[0]!;
    const other = catalog([view("a", a), view("b", b)])[0]!;
    expect(one).toMatchObject({ family: "llama", parameters: 8_030_261_248 });
    expect(other).toMatchObject({ family: "llama", parameters: 8_030_261_248 });
  });

  test("a holder that says nothing of them leaves them out", () => {
    const [chat] = catalog([view("a", announced([{ name: "chat" }]))]);
    expect(chat!.family).toBeUndefined();
    expect(chat!.parameters).toBeUndefined();
    expect(detailsOf(chat)).toMatchObject({ family: "", families: [], parameter_size: "", quantization_level: "" });
  });
});

describe("Ollama's routes for models of other nodes", () => {
  const host = view("host", announced([{ name: "chat", arch: "llama", parameters: 8_030_261_248, quant: "Q4_K_M" }, { name: "cold", arch: "bert", parameters: 1 }]), { ready: ["chat"] });
  const self = view("self", announced([{ name: "mine" }]), { ready: ["mine"] });
  const models: CatalogModel[] = catalog([host, self]);
  const chat = models.find((m) => m.name === "chat")!;

  test("/api/show: family, parameter size and quant, model_info's architecture and count", () => {
    const shown = remoteShowAnswer(chat);
    expect(shown.details).toMatchObject({ format: "gguf", family: "llama", families: ["llama"], parameter_size: "8.03B", quantization_level: "Q4_K_M" });
    expect(shown.model_info).toEqual({ "general.architecture": "llama", "general.parameter_count": 8_030_261_248 });
    expect(shown.capabilities).toEqual(["completion"]);
  });

  test.each<[string, string | undefined, string[]]>([
    ["an embedding model its holders agree on", "embedding", ["embedding"]],
    ["a reranker", "reranking", []],
    ["a chat model", "llm", ["completion"]],
    ["a kind nobody agrees on", undefined, ["completion"]],
  ])("/api/show capabilities of %s", (_, type, capabilities) => {
    expect(remoteShowAnswer({ ...chat, ...(type ? { type } : { type: undefined }) }).capabilities).toEqual(capabilities);
  });

  test("/api/tags: the same details", () => {
    expect(remoteTagsEntry(chat)).toMatchObject({ name: "chat:latest", size: 1000, details: { family: "llama", parameter_size: "8.03B" } });
  });

  test("/api/ps: what another node serves, naming it; not what nobody serves, nor what is listed here", () => {
    const ps = meshPsEntries(models, new Set(["mine"]), "self");
    expect(ps.map((e) => e.name)).toEqual(["chat:latest"]);
    expect(ps[0]).toMatchObject({ model: "chat:latest", size: 1000, size_vram: 0, details: { family: "llama", parameter_size: "8.03B", served_by: "host" } });
    expect(new Date(ps[0]!.expires_at as string).getUTCFullYear()).toBeGreaterThan(2100);
  });

  test("/api/ps: when another node's model unloads is what that node's own ps says, else never", () => {
    const said = psExpiries("host", { models: [{ model: "chat:latest", expires_at: "2026-11-29T10:10:00Z", details: { served_by: "host" } }] });
    expect(meshPsEntries(models, new Set(), "self", said)[0]!.expires_at).toBe("2026-11-29T10:10:00.000Z");
    expect(meshPsEntries(models, new Set(), "self", psExpiries("other", { models: [{ model: "chat:latest", expires_at: "2026-11-29T10:10:00Z", details: { served_by: "other" } }] }))[0]!.expires_at).toBe(
      new Date(Date.UTC(2318, 0, 1)).toISOString(),
    );
    expect(psPeers(models, new Set(), "self")).toEqual(["host"]);
    expect(psPeers(models, new Set(["chat"]), "self")).toEqual([]);
  });

  const entry = (over: Record<string, unknown>) => ({ models: [{ model: "chat:latest", expires_at: "2026-11-29T10:10:00Z", details: { served_by: "host" }, ...over }] });
  test.each<[string, unknown, string | undefined]>([
    ["its own entry", entry({}), "2026-11-29T10:10:00.000Z"],
    ["an entry naming another server", entry({ details: { served_by: "someone" } }), undefined],
    ["an entry with no details", entry({ details: undefined }), undefined],
    ["a date that is not one", entry({ expires_at: "soon" }), undefined],
    ["a date past Ollama's never", entry({ expires_at: "9999-01-01T00:00:00Z" }), undefined],
    ["a date before 1970", entry({ expires_at: "1900-01-01T00:00:00Z" }), undefined],
    ["a name too long", entry({ model: "x".repeat(600) }), undefined],
    ["no models list", { models: "chat" }, undefined],
    ["not an object", "junk", undefined],
    ["nothing said", undefined, undefined],
  ])("a member's ps: %s", (_, answer, expected) => {
    const got = psExpiries("host", answer);
    expect([...got.values()][0]).toBe(expected);
  });

  test("/api/ps: a model this node's announcement says it serves but its pool does not list is not another node's", () => {
    expect(meshPsEntries(models, new Set(), "self").map((e) => e.name)).toEqual(["chat:latest"]);
  });

  test("/api/ps: a model served here and elsewhere (a replica) is listed once, as this node's", () => {
    const both = catalog([view("host", announced([{ name: "chat" }]), { ready: ["chat"] }), view("self", announced([{ name: "chat" }]), { ready: ["chat"] })]);
    expect(meshPsEntries(both, new Set(["chat"]), "self")).toEqual([]);
    expect(meshPsEntries(both, new Set(), "self").map((e) => (e.details as { served_by: string }).served_by)).toEqual(["host"]);
  });
});
