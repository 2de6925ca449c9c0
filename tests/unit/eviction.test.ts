import { describe, expect, test } from "bun:test";
import { Device } from "../../models/recipe-devices.ts";
import { idleLimitMs, idleVictims, planLoad, planNuclear, type LoadPlan, type LoadWant, type ServerView, sweepPeriodMs } from "../../pool/eviction.ts";

/** A server: model name, type, last use, and flags. */
function s(model: string, lastUse: number, over: Partial<ServerView> = {}): ServerView {
  return { model, type: "llm", devices: Device.GPU, lastUse, pinned: false, busy: false, ...over };
}
const llm = (model: string): LoadWant => ({ model, type: "llm", devices: Device.GPU });

describe("planLoad", () => {
  const cases: [string, ServerView[], LoadWant, number, LoadPlan][] = [
    ["empty pool loads", [], llm("a"), 1, { action: "load", evict: [] }],
    ["already loaded", [s("a", 1)], llm("a"), 1, { action: "loaded" }],
    ["free slot: no eviction", [s("a", 1)], llm("b"), 2, { action: "load", evict: [] }],
    ["full: evicts the least recently used", [s("a", 5), s("b", 3), s("c", 9)], llm("d"), 3, { action: "load", evict: ["b"] }],
    ["limit 1 evicts the one llm", [s("a", 1)], llm("b"), 1, { action: "load", evict: ["a"] }],
    ["other types do not count", [s("e", 1, { type: "embedding" })], llm("b"), 1, { action: "load", evict: [] }],
    ["an embedding evicts only embeddings", [s("a", 1), s("e", 2, { type: "embedding" })], { model: "f", type: "embedding", devices: Device.GPU }, 1, { action: "load", evict: ["e"] }],
    ["no limit never evicts", [s("a", 1), s("b", 2), s("c", 3)], llm("d"), -1, { action: "load", evict: [] }],
    ["busy LRU is skipped for an idle one", [s("a", 1, { busy: true }), s("b", 2)], llm("c"), 2, { action: "load", evict: ["b"] }],
    ["every candidate busy: wait", [s("a", 1, { busy: true })], llm("b"), 1, { action: "wait", blockedBy: ["a"] }],
    ["pinned LRU is skipped", [s("a", 1, { pinned: true }), s("b", 2)], llm("c"), 2, { action: "load", evict: ["b"] }],
    ["all pinned: reject", [s("a", 1, { pinned: true })], llm("b"), 1, { action: "reject", reason: "all 1 llm slot(s) hold pinned models (a); unload one or raise --max-loaded-models" }],
    ["pinned and busy: wait for the busy one", [s("a", 1, { pinned: true }), s("b", 2, { busy: true })], llm("c"), 2, { action: "wait", blockedBy: ["b"] }],
    ["over the limit (limit lowered): evicts enough", [s("a", 1), s("b", 2), s("c", 3)], llm("d"), 2, { action: "load", evict: ["a", "b"] }],
    ["ties on last use break by name", [s("b", 1), s("a", 1)], llm("c"), 2, { action: "load", evict: ["a"] }],
    // The model this node hosts for its mesh is not evicted by a load on demand (--evict-mesh-models off).
    ["the mesh's model is skipped for another", [s("m", 1, { meshHeld: true }), s("b", 2)], llm("c"), 2, { action: "load", evict: ["b"] }],
    [
      "the only slot holds the mesh's model: refused, saying how to allow it",
      [s("m", 1, { meshHeld: true })],
      llm("b"),
      1,
      { action: "reject", heldForMesh: true, reason: "its llm slot(s) hold m, and m is hosted here for the mesh; raise --max-loaded-models, or start the node with --evict-mesh-models on to let loads on demand take its place" },
    ],
    [
      "the NPU holds the mesh's model: refused, whatever the type",
      [s("m", 1, { meshHeld: true, devices: Device.NPU, type: "embedding" })],
      { model: "b", type: "llm", devices: Device.NPU },
      -1,
      { action: "reject", heldForMesh: true, reason: "the NPU holds m, hosted here for the mesh; start the node with --evict-mesh-models on to let loads on demand take its place" },
    ],
    ["the mesh's model of another type is no obstacle", [s("m", 1, { meshHeld: true, type: "embedding" })], llm("b"), 1, { action: "load", evict: [] }],
  ];
  test.each(cases)("%s", (_, servers, want, limit, plan) => expect(planLoad(servers, want, limit)).toEqual(plan));
});

describe("planLoad: NPU exclusivity", () => {
  const npu = (model: string, type: ServerView["type"] = "llm"): LoadWant => ({ model, type, devices: Device.NPU });
  const cases: [string, ServerView[], LoadWant, number, LoadPlan][] = [
    ["evicts the NPU holder of another type, within limits", [s("x", 9, { type: "embedding", devices: Device.NPU }), s("a", 1)], npu("n"), 2, { action: "load", evict: ["x"] }],
    ["evicts the NPU holder even with no limit", [s("x", 9, { devices: Device.NPU | Device.GPU })], npu("n"), -1, { action: "load", evict: ["x"] }],
    ["an NPU holder leaving frees its slot too", [s("x", 9, { devices: Device.NPU })], npu("n"), 1, { action: "load", evict: ["x"] }],
    ["a busy NPU holder: wait", [s("x", 9, { devices: Device.NPU, busy: true })], npu("n"), -1, { action: "wait", blockedBy: ["x"] }],
    ["a pinned NPU holder: reject", [s("x", 9, { devices: Device.NPU, pinned: true })], npu("n"), -1, { action: "reject", reason: "the NPU is held by pinned model x" }],
    ["a GPU load leaves the NPU holder alone", [s("x", 9, { type: "embedding", devices: Device.NPU })], llm("g"), 1, { action: "load", evict: [] }],
  ];
  test.each(cases)("%s", (_, servers, want, limit, plan) => expect(planLoad(servers, want, limit)).toEqual(plan));
});

test.each([
  ["evicts every idle server, pinned too", [s("a", 1), s("b", 2, { pinned: true }), s("c", 3, { busy: true })], ["a", "b"]],
  ["nothing loaded", [], []],
  ["never the model hosted for the mesh", [s("a", 1), s("m", 2, { meshHeld: true })], ["a"]],
] as const)("planNuclear: %s", (_, servers, victims) => expect(planNuclear(servers)).toEqual([...victims]));

describe("idleVictims", () => {
  const cases: [string, ServerView[], number, number, string[]][] = [
    ["idle past the limit", [s("a", 0), s("b", 900)], 1000, 500, ["a"]],
    ["0 means never", [s("a", 0)], 10_000, 0, []],
    ["busy and pinned stay", [s("a", 0, { busy: true }), s("b", 0, { pinned: true })], 10_000, 500, []],
    ["a server's own limit before the node's", [s("a", 0, { idleMs: 2000 }), s("b", 0)], 1000, 500, ["b"]],
    ["a server's own short limit", [s("a", 0, { idleMs: 200 }), s("b", 0)], 300, 500, ["a"]],
    ["its own limit where the node has none", [s("a", 0, { idleMs: 200 }), s("b", 0)], 300, 0, ["a"]],
    ["negative: never, past the node's limit", [s("a", 0, { idleMs: -1 }), s("b", 0)], 10_000, 500, ["b"]],
    ["its own limit, still pinned stays", [s("a", 0, { idleMs: 100, pinned: true })], 10_000, 0, []],
  ];
  test.each(cases)("%s", (_, servers, now, idleMs, victims) => expect(idleVictims(servers, now, idleMs)).toEqual(victims));
});

test.each<[number | undefined, number, number]>([
  [undefined, 1000, 1000],
  [undefined, 0, 0],
  [5000, 1000, 5000],
  [5000, 0, 5000],
  [-1, 1000, 0],
  [-300_000, 0, 0],
])("idleLimitMs(override %p, node %p) = %p", (override, node, limit) => expect(idleLimitMs(override, node)).toBe(limit));

test.each([
  [2000, 500],
  [100, 100],
  [30 * 60_000, 10_000],
])("sweepPeriodMs(%p) = %p", (idle, period) => expect(sweepPeriodMs(idle)).toBe(period));
