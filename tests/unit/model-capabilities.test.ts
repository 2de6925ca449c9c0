/** What a model can be asked beyond text: read from its files, announced, agreed in the catalog, and an image refused for a model that cannot read it. */
import { describe, expect, test } from "bun:test";
import { ModelOnDiskSchema } from "../../mesh/messages.ts";
import { templateTakesTools } from "../../models/gguf-info.ts";
import { capabilitiesOfModel, labelsWith } from "../../models/model-capabilities.ts";
import type { ModelInfo } from "../../models/model-store.ts";
import { catalog, electionCandidates, type NodeView } from "../../placement/catalog.ts";
import { elect, splitPlan, type Candidate } from "../../placement/election.ts";
import { CHAT_TEMPLATES } from "../../scripts/test-model/templates.ts";
import { blindCopyRefusal, carriesImage, knownVision, visionRefusal } from "../../router/serving/vision-models.ts";

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

  test("what this node can tell before it routes: its own copy, then what every holder says; only chat models count", () => {
    const local = [
      { name: "mine-blind", type: "llm", mmproj: undefined, facts: undefined, labels: [] },
      { name: "mine-blind-seen-elsewhere", type: "llm", mmproj: undefined, facts: undefined, labels: [] },
      { name: "mine-seeing", type: "llm", mmproj: "/m/mmproj-mine-seeing.gguf", facts: undefined, labels: [] },
      { name: "vec", type: "embedding", mmproj: undefined, facts: undefined, labels: [] },
    ] as unknown as ModelInfo[];
    const entries = catalog([
      view("self", [{ name: "mine-blind", type: "llm", caps: [] }, { name: "mine-blind-seen-elsewhere", type: "llm", caps: [] }, { name: "mine-seeing", type: "llm", caps: ["vision"] }]),
      view("other", [{ name: "mine-blind-seen-elsewhere", type: "llm", caps: ["vision"] }, { name: "far", type: "llm", caps: ["vision"] }, { name: "emb", type: "embedding" }]),
    ]);
    expect(knownVision(local, entries)).toEqual([
      { name: "mine-blind", vision: false },
      // Another's copy reads images and may be the one that answers: its own server tells.
      { name: "mine-blind-seen-elsewhere", vision: undefined },
      { name: "mine-seeing", vision: true },
      { name: "far", vision: true },
    ]);
    expect(knownVision(local, [])[0]).toEqual({ name: "mine-blind", vision: false });
  });

  test.each<[string, Pick<ModelInfo, "name" | "type" | "mmproj">, unknown, string | undefined]>([
    ["a blind copy asked an image", { name: "m", type: "llm", mmproj: undefined }, { messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "data:," } }] }] }, 'model "m" does not read images on this node: its copy has no projector'],
    ["a copy with its projector", { name: "m", type: "llm", mmproj: "/p" }, { messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "data:," } }] }] }, undefined],
    ["a blind copy asked text", { name: "m", type: "llm", mmproj: undefined }, { messages: [{ role: "user", content: "hi" }] }, undefined],
    ["an embedding model (its own refusal)", { name: "e", type: "embedding", mmproj: undefined }, { messages: [{ role: "user", content: [{ type: "image", source: {} }] }] }, undefined],
  ])("blindCopyRefusal: %s", (_, model, json, words) => {
    const out = blindCopyRefusal(model, json);
    if (words === undefined) return expect(out).toBeUndefined();
    expect(out).toContain(words);
  });
});

describe("the host of a model some copy of which reads images: a copy with its projector first", () => {
  const holder = (nodeId: string, vramGb: number, caps: ("tools" | "vision")[], over: Partial<NodeView> = {}): NodeView => ({
    ...view(nodeId, [{ name: "m", type: "llm", caps }]),
    vramBytes: vramGb * 1e9,
    assigned: "m",
    prefersSeeingHosts: true,
    ...over,
  });
  const hostOf = (views: NodeView[]) => elect(electionCandidates(views, "m"));
  test.each<[string, NodeView[], string]>([
    ["the copy with its projector, over a bigger one without", [holder("big-blind", 64, []), holder("small-seeing", 8, ["vision"])], "small-seeing"],
    ["no copy reads images: the biggest, as ever", [holder("big", 64, []), holder("small", 8, [])], "big"],
    ["every copy reads images: the biggest", [holder("big", 64, ["vision"]), holder("small", 8, ["vision"])], "big"],
    [
      "the copy that reads images is outside the group: a blind copy still hosts (better than nobody)",
      [holder("big-blind", 64, []), holder("small-blind", 8, []), { ...holder("away", 8, ["vision"]), assigned: undefined }],
      "big-blind",
    ],
    ["a group with an older node: the biggest, as the older node elects", [holder("big-blind", 64, [], { prefersSeeingHosts: false }), holder("small-seeing", 8, ["vision"])], "big-blind"],
    [
      "a member without the files that fetches is no better than the copy that reads images",
      [holder("seeing", 8, ["vision"]), { ...view("empty", []), vramBytes: 64e9, assigned: "m", prefersSeeingHosts: true }],
      "seeing",
    ],
  ])("%s", (_, views, host) => expect(hostOf(views)).toBe(host));
});

describe("a running host whose copy cannot read images gives way to one whose copy can", () => {
  const candidate = (nodeId: string, vramBytes: number, seesImages: boolean, over: Partial<Candidate> = {}): Candidate => ({ nodeId, vramBytes, canHost: true, seesImages, prefersSeeingHosts: true, keepsLayouts: true, ...over });
  test.each<[string, Candidate[], string]>([
    ["blind and running, a seeing copy in the group: the seeing one", [candidate("blind", 64, false, { ready: true, hosting: true }), candidate("seeing", 8, true)], "seeing"],
    ["seeing and running: it stays, whatever the memory", [candidate("big", 64, true), candidate("running", 8, true, { ready: true, hosting: true })], "running"],
    ["blind and running, no seeing copy: it stays", [candidate("running", 8, false, { ready: true, hosting: true }), candidate("big", 64, false)], "running"],
    ["blind and running in a group with an older node: it stays", [candidate("blind", 64, false, { ready: true, hosting: true }), candidate("seeing", 8, true, { prefersSeeingHosts: false })], "blind"],
  ])("%s", (_, group, host) => expect(splitPlan(group, 1)?.host).toBe(host));
});
