/** What a model can be asked beyond text: read from its files, announced, agreed in the catalog, and an image refused for a model that cannot read it. */
import { describe, expect, test } from "bun:test";
import { ModelOnDiskSchema } from "../../mesh/messages.ts";
import { templateTakesTools } from "../../models/gguf-info.ts";
import { capabilitiesOfModel, labelsWith } from "../../models/model-capabilities.ts";
import type { ModelInfo } from "../../models/model-store.ts";
import { catalog, type NodeView } from "../../placement/catalog.ts";
import { CHAT_TEMPLATES } from "../../scripts/test-model/templates.ts";
import { carriesImage, knownVision, visionRefusal } from "../../router/serving/vision-models.ts";

describe("templateTakesTools", () => {
  test.each<[string, unknown, boolean]>([
    ["ChatML without tools", CHAT_TEMPLATES.chatml, false],
    ["a template that lists tools", "{% if tools %}{{ tools | tojson }}{% endif %}", true],
    ["tools as a word of its own only", "{{ message.toolset }}", false],
    ["none", undefined, false],
    ["not a string", 42, false],
  ])("%s", (_, template, takes) => expect(templateTakesTools(template)).toBe(takes));
});

type Caps = Pick<ModelInfo, "type" | "mmproj" | "facts" | "labels">;
const chat = (over: Partial<Caps> = {}): Caps => ({ type: "llm", mmproj: undefined, facts: undefined, labels: [], ...over });

describe("capabilitiesOfModel", () => {
  test.each<[string, Caps, string[]]>([
    ["plain chat", chat(), []],
    ["a projector beside it", chat({ mmproj: "/m/mmproj-x.gguf" }), ["vision"]],
    ["a template that takes tools", chat({ facts: { templateTakesTools: true } as ModelInfo["facts"] }), ["tools"]],
    ["Lemonade's label, in any case", chat({ labels: ["Tool-Calling"] }), ["tools"]],
    ["both", chat({ mmproj: "/p", labels: ["tool-calling"] }), ["tools", "vision"]],
    ["an embedding model with a stray projector", chat({ type: "embedding", mmproj: "/p" }), []],
  ])("%s", (_, m, caps) => expect(capabilitiesOfModel(m)).toEqual(caps as never));

  test("labels gain Lemonade's words, each once", () => {
    expect(labelsWith(["vision", "hot"], ["tools", "vision"])).toEqual(["vision", "hot", "tool-calling"]);
  });
});

describe("announced capabilities", () => {
  const entry = (caps: unknown) => ModelOnDiskSchema.parse({ name: "m", size: 1, need: 1, caps }).caps;
  test.each<[string, unknown, string[] | undefined]>([
    ["known ones, in their order", ["vision", "tools"], ["tools", "vision"]],
    ["unknown names dropped", ["vision", "teleport"], ["vision"]],
    ["none said: none", [], []],
    ["absent: unknown (an older node)", undefined, undefined],
    ["junk: unknown, the model kept", "vision", undefined],
    ["too many: unknown", Array(9).fill("tools"), undefined],
  ])("%s", (_, caps, read) => expect(entry(caps)).toEqual(read as never));
});

const view = (nodeId: string, models: { name: string; type?: string; caps?: ("tools" | "vision")[] }[]): NodeView => ({
  nodeId,
  vramBytes: 1e9,
  modelsOnDisk: models.map((m) => ({ sizeBytes: 1, needBytes: 1, ...m })),
  assigned: undefined,
  ready: [],
  idle: [],
});

describe("the catalog's capabilities: what every holder says alike", () => {
  test.each<[string, NodeView[], string[] | undefined]>([
    ["one holder", [view("a", [{ name: "m", type: "llm", caps: ["vision"] }])], ["vision"]],
    ["two that agree", [view("a", [{ name: "m", caps: ["tools", "vision"] }]), view("b", [{ name: "m", caps: ["tools", "vision"] }])], ["tools", "vision"]],
    ["two that do not: unknown", [view("a", [{ name: "m", caps: ["vision"] }]), view("z-liar", [{ name: "m", caps: [] }])], undefined],
    ["one says nothing (older): unknown", [view("a", [{ name: "m", caps: [] }]), view("b", [{ name: "m" }])], undefined],
    ["none at all", [view("a", [{ name: "m", caps: [] }])], []],
  ])("%s", (_, views, caps) => expect(catalog(views).find((m) => m.name === "m")!.caps).toEqual(caps as never));
});

describe("carriesImage", () => {
  const png = "data:image/png;base64,iVBORw0KGgo=";
  test.each<[string, unknown, boolean]>([
    ["text only", { messages: [{ role: "user", content: "hi" }] }, false],
    ["text parts only", { messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }] }, false],
    ["the chat API's image_url", { messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: png } }] }] }, true],
    ["Anthropic's image block", { messages: [{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "iVBO" } }] }] }, true],
    ["an image in an Anthropic tool result", { messages: [{ role: "user", content: [{ type: "tool_result", tool_use_id: "t", content: [{ type: "image", source: {} }] }] }] }, true],
    ["a text tool result", { messages: [{ role: "user", content: [{ type: "tool_result", tool_use_id: "t", content: "sunny" }] }] }, false],
    ["no messages (a prompt)", { prompt: "hi" }, false],
    ["junk", { messages: [null, 3, { content: [null, "x"] }] }, false],
  ])("%s", (_, body, carries) => expect(carriesImage(body)).toBe(carries));
});

describe("visionRefusal", () => {
  const known = [
    { name: "text", vision: false },
    { name: "seer", vision: true },
    { name: "far-seer", vision: true },
    { name: "old", vision: undefined },
  ];
  test.each<[string, string, string | undefined]>([
    ["a model that reads images goes on", "seer", undefined],
    ["a text model: refused, naming those that read", "text", 'model "text" does not read images (it has no projector); models of the mesh that do: far-seer, seer'],
    ["by its :latest name", "text:latest", "models of the mesh that do: far-seer, seer"],
    ["a model whose holders do not say: left to its server", "old", undefined],
    ["a model nobody has: left to the usual not-found", "nowhere", undefined],
  ])("%s", (_, model, words) => {
    const out = visionRefusal(model, known);
    if (words === undefined) return expect(out).toBeUndefined();
    expect(out).toContain(words);
  });

  test("none in the mesh: says how to get one", () => {
    expect(visionRefusal("text", [{ name: "text", vision: false }])).toContain("no model of the mesh does: put a vision model's projector");
  });

  test("this node's own files win over what holders say; only chat models count", () => {
    const local = [
      { name: "mine", type: "llm", mmproj: undefined, facts: undefined, labels: [] },
      { name: "vec", type: "embedding", mmproj: undefined, facts: undefined, labels: [] },
    ] as unknown as ModelInfo[];
    const entries = catalog([view("a", [{ name: "mine", type: "llm", caps: ["vision"] }, { name: "far", type: "llm", caps: ["vision"] }, { name: "emb", type: "embedding" }])]);
    expect(knownVision(local, entries)).toEqual([
      { name: "mine", vision: false },
      { name: "far", vision: true },
    ]);
  });
});
