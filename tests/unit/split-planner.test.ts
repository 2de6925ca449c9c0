/**
 * The pool's questions before a load, answered by parts built before it: the split planner (which
 * rpc-servers a load runs over, recorded in the group's state; whether this node lends its
 * rpc-server to another's split) and the group's state (whether a server is hosted for the mesh),
 * and the `Signal`s that carry the pool's reports up to the parts built after it.
 */
import { describe, expect, test } from "bun:test";
import { Signal } from "../../base/signal.ts";
import type { ModelInfo } from "../../models/model-store.ts";
import type { CatalogModel, NodeView } from "../../placement/catalog.ts";
import { GroupState } from "../../node/group-state.ts";
import { SplitPlanner } from "../../node/split-planner.ts";

const GB = 1e9;
const node = (nodeId: string, vramBytes: number, over: Partial<NodeView> = {}): NodeView => ({
  nodeId,
  vramBytes,
  modelsOnDisk: [{ name: "big", sizeBytes: 10 * GB, needBytes: 15 * GB }],
  assigned: "big",
  ready: [],
  idle: [],
  rpcProtocol: "3.0.0",
  ...over,
});
const model = (name: string, needGb: number) => ({ name, sizeBytes: needGb * GB, ctxSize: 512 }) as unknown as ModelInfo;

function setup(views: NodeView[], catalog: Partial<CatalogModel>[] = []) {
  const group = new GroupState(() => false);
  const needs = new Map([
    ["big", 15 * GB],
    ["small", 2 * GB],
    ["huge", 40 * GB],
  ]);
  const splits = new SplitPlanner({
    view: { views: () => views, catalog: () => catalog as CatalogModel[] },
    group,
    vramBytes: views[0]!.vramBytes,
    needOf: (m) => needs.get(m.name) ?? 0,
    ownRpcEndpoint: () => undefined,
    tunnelEndpoint: async (peerId) => `127.0.0.1:${peerId === "b" ? 4001 : 4002}`,
  });
  return { group, splits };
}

describe("SplitPlanner: the rpc-servers a load runs over, recorded in the group's state", () => {
  test.each([
    // [case, assigned, model, need GB, endpoints, recorded workers]
    ["a model this node is not assigned runs here alone", undefined, "small", 2, [], ""],
    ["the assigned model that fits here alone runs here alone", "small", "small", 2, [], ""],
    ["the assigned model too big for one node runs over its group", "big", "big", 15, ["127.0.0.1:4001"], "b"],
  ] as const)("%s", async (_case, assigned, name, needGb, endpoints, recorded) => {
    // Election ranks the most memory first: this node (a) hosts its group, b is its worker.
    const { group, splits } = setup([node("a", 12 * GB), node("b", 10 * GB)]);
    group.assigned = assigned;
    const split = await splits.rpcSplit(model(name, needGb));
    expect(split.endpoints).toEqual([...endpoints]);
    expect(group.loadedSplits.get(name)).toBe(recorded);
  });

  test("a load nobody here can hold is refused before anything is recorded, naming what it needs and what is offered", async () => {
    const { group, splits } = setup([node("a", 10 * GB), node("b", 10 * GB)]);
    group.assigned = "big";
    await expect(splits.rpcSplit(model("huge", 40))).rejects.toThrow(/"huge" needs 37\.25 GiB and this node offers 9\.31 GiB/);
    expect(group.loadedSplits.has("huge")).toBe(false);
  });

  test.each([
    // [case, assigned, hosting, catalog split, lends]
    ["in no group", undefined, false, true, false],
    ["the host of a split model", "big", true, true, false],
    ["a member of a split model's group that does not host it", "big", false, true, true],
    ["a member of a whole model's group", "big", false, false, false],
  ] as const)("lends its rpc-server: %s", (_case, assigned, hosting, split, lends) => {
    const { group, splits } = setup([node("a", 10 * GB)], [{ name: "big", split }]);
    group.assigned = assigned;
    group.hosting = hosting;
    expect(splits.lendsToSplit()).toBe(lends);
  });
});

describe("GroupState.hostsForMesh: on-demand loads may not evict it", () => {
  test.each([
    // [case, assigned, hosting, peers, model, held]
    ["the model it hosts for its group, with peers", "m", true, 2, "m", true],
    ["alone, a node swaps like a single box", "m", true, 0, "m", false],
    ["assigned but not hosting (a worker, or still deciding)", "m", false, 2, "m", false],
    ["another model, loaded on demand", "m", true, 2, "other", false],
    ["in no group", undefined, false, 2, "m", false],
  ] as const)("%s", (_case, assigned, hosting, peers, name, held) => {
    const group = new GroupState(() => false);
    group.assigned = assigned;
    group.hosting = hosting;
    expect(group.hostsForMesh(name, peers)).toBe(held);
  });
});

describe("Signal: a report the parts built after its reporter hear", () => {
  test("every subscriber hears each emit with its payload, in the order they subscribed, until it stops", () => {
    const evicted = new Signal<[model: string, cause: string]>();
    const heard: string[] = [];
    evicted.emit("before", "idle"); // nobody listens yet: nothing fails
    const stop = evicted.subscribe((m, c) => void heard.push(`first ${m} ${c}`));
    evicted.subscribe((m) => void heard.push(`second ${m}`));
    evicted.emit("m", "lru");
    stop();
    evicted.emit("n", "unload");
    expect(heard).toEqual(["first m lru", "second m", "second n"]);
  });
});
