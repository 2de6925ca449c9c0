import { describe, expect, test } from "bun:test";
import { catalog, type NodeModel, type NodeView } from "../../placement/catalog.ts";
import { AnnouncementSchema } from "../../mesh/messages.ts";
import { pressed, replicaRelease, replicasToAdd, type DemandSignal, type HeldReplica, type ReplicaView } from "../../placement/replicas.ts";
import { demandList } from "../../node/replica-keeper.ts";
import { fakeAnnouncement } from "../../harness/rogue-peer.ts";

const GB = 1e9;
// Every holder announces the one content identity of each model unless a case says otherwise.
const m = (name: string, gb: number, identity = `content-of-${name}`): NodeModel => ({ name, sizeBytes: gb * GB, needBytes: gb * GB * 1.2, identity });
const busy = (model: string, over: Partial<DemandSignal> = {}): DemandSignal => ({ model, queued: 2, waitMs: 900, ...over });
const calm = (model: string): DemandSignal => ({ model, queued: 0, waitMs: 10 });
const node = (nodeId: string, vramGb: number, over: Partial<ReplicaView> = {}): ReplicaView => ({
  nodeId,
  vramBytes: vramGb * GB,
  modelsOnDisk: [],
  assigned: undefined,
  ready: [],
  idle: [],
  takesReplicas: true,
  ...over,
});
/** `b` is in the group of "huge" (needs 48 GB: fits nowhere, needs-capacity) but speaks another rpc major than its host `c`: in no split plan. */
const outsideHuge = (over: Partial<ReplicaView> = {}) => node("b", 16, { modelsOnDisk: [m("m", 5), m("huge", 40)], assigned: "huge", rpcProtocol: "1.0", ...over });
const hugeHost = () => node("c", 24, { modelsOnDisk: [m("huge", 40)], assigned: "huge", rpcProtocol: "2.0", takesReplicas: false });
/** `a` hosts "m" (5 GB, needs 6) and is pressed unless told otherwise. */
const host = (over: Partial<ReplicaView> = {}) => node("a", 24, { modelsOnDisk: [m("m", 5)], assigned: "m", hosting: true, ready: ["m"], demand: [busy("m")], ...over });

describe("pressed", () => {
  test.each([
    ["no demand announced", undefined, false],
    ["calm: nothing queued, short waits", { model: "m", queued: 0, waitMs: 249 }, false],
    ["requests queued now", { model: "m", queued: 1, waitMs: 0 }, true],
    ["a wait of 250 ms lately", { model: "m", queued: 0, waitMs: 250 }, true],
    ["junk numbers read as calm", { model: "m", queued: Number.NaN, waitMs: Number.NaN }, false],
    ["negative numbers read as calm", { model: "m", queued: -3, waitMs: -1 }, false],
  ] as const)("%s", (_, demand, expected) => expect(pressed(demand)).toBe(expected));
});

describe("replicasToAdd", () => {
  test.each<[string, ReplicaView[], ReturnType<typeof replicasToAdd>]>([
    ["the host is pressed and a free node has the file: it adds a replica", [host(), node("b", 16, { modelsOnDisk: [m("m", 5)] })], [{ model: "m", node: "b" }]],
    ["not pressed: none", [host({ demand: [calm("m")] }), node("b", 16, { modelsOnDisk: [m("m", 5)] })], []],
    ["no demand announced (an older host): none", [host({ demand: undefined }), node("b", 16, { modelsOnDisk: [m("m", 5)] })], []],
    ["demand junk (not a list): none", [host({ demand: "lots" as never }), node("b", 16, { modelsOnDisk: [m("m", 5)] })], []],
    ["demand for another model only: none", [host({ demand: [busy("x")] }), node("b", 16, { modelsOnDisk: [m("m", 5)] })], []],
    ["nobody serves the model: nothing to relieve", [host({ ready: [] }), node("b", 16, { modelsOnDisk: [m("m", 5)] })], []],
    [
      "one of two servers pressed: the other takes requests, none added",
      [host(), node("b", 16, { modelsOnDisk: [m("m", 5)], ready: ["m"], replicating: ["m"], demand: [calm("m")] }), node("c", 16, { modelsOnDisk: [m("m", 5)] })],
      [],
    ],
    [
      "both servers pressed: a third one",
      [host(), node("b", 16, { modelsOnDisk: [m("m", 5)], ready: ["m"], replicating: ["m"], demand: [busy("m")] }), node("c", 16, { modelsOnDisk: [m("m", 5)] })],
      [{ model: "m", node: "c" }],
    ],
    ["no free node: none", [host(), node("b", 4, { modelsOnDisk: [m("m", 5)] })], []],
    ["a node that takes no replicas (--replicas off, an older version): none", [host(), node("b", 16, { modelsOnDisk: [m("m", 5)], takesReplicas: false })], []],
    ["a free node without the file copies it from a peer that has it", [host(), node("b", 16)], [{ model: "m", node: "b", copyFrom: "a" }]],
    [
      "holders announce different contents under the name: no copy, the replica goes to a node with its own file",
      [host(), node("b", 32), node("c", 16, { modelsOnDisk: [m("m", 5, "other-content")] })],
      [{ model: "m", node: "c" }],
    ],
    ["the only holder announces no identity (hashing, an older version): no copy", [host({ modelsOnDisk: [{ name: "m", sizeBytes: 5 * GB, needBytes: 6 * GB }] }), node("b", 16)], []],
    ["a node that does not fetch (--fetch off) and has no file: none", [host(), node("b", 16, { fetches: false })], []],
    ["a node that does not fetch but has the file: it may", [host(), node("b", 16, { fetches: false, modelsOnDisk: [m("m", 5)] })], [{ model: "m", node: "b" }]],
    [
      "two candidates: the one with more free memory",
      [host(), node("b", 16, { modelsOnDisk: [m("m", 5)] }), node("c", 32, { modelsOnDisk: [m("m", 5)] })],
      [{ model: "m", node: "c" }],
    ],
    [
      "two candidates tie: the larger node id",
      [host(), node("c", 16, { modelsOnDisk: [m("m", 5)] }), node("b", 16, { modelsOnDisk: [m("m", 5)] })],
      [{ model: "m", node: "c" }],
    ],
    [
      "free memory counts what the node serves: 16 GB less its own 12 GB model leaves too little",
      [host(), node("b", 16, { modelsOnDisk: [m("m", 5), m("big", 10)], assigned: "big", hosting: true, ready: ["big"] })],
      [],
    ],
    [
      "...and its group's model, loading or not, when it hosts it",
      [host(), node("b", 16, { modelsOnDisk: [m("m", 5), m("big", 10)], assigned: "big", hosting: true })],
      [],
    ],
    [
      "a node hosting another model with room to spare takes it",
      [host(), node("b", 24, { modelsOnDisk: [m("m", 5), m("small", 2)], assigned: "small", hosting: true, ready: ["small"] })],
      [{ model: "m", node: "b" }],
    ],
    ["a spare in the model's own group (neither host nor worker) is free", [host(), node("b", 16, { modelsOnDisk: [m("m", 5)], assigned: "m" })], [{ model: "m", node: "b" }]],
    [
      "a worker of the model's split is not: its memory is the split's",
      [
        node("a", 8, { modelsOnDisk: [m("m", 10)], assigned: "m", hosting: true, ready: ["m"], layout: ["b"], keepsLayouts: true, demand: [busy("m")] }),
        node("b", 16, { modelsOnDisk: [m("m", 10)], assigned: "m", keepsLayouts: true }),
      ],
      [],
    ],
    [
      "a node whose own model waits for memory (needs-capacity), outside its split plan (another rpc major): none, it would release it at once",
      [host(), outsideHuge(), hugeHost()],
      [],
    ],
    ["...a free node elsewhere takes it instead", [host(), outsideHuge(), hugeHost(), node("d", 8, { modelsOnDisk: [m("m", 5)] })], [{ model: "m", node: "d" }]],
    [
      "a replica on its way (listed, not ready yet): no second one",
      [host(), node("b", 16, { modelsOnDisk: [m("m", 5)], replicating: ["m"] }), node("c", 16, { modelsOnDisk: [m("m", 5)] })],
      [],
    ],
    [
      "a node holding its most replicas already: none more",
      [host(), node("b", 64, { modelsOnDisk: [m("m", 5)], replicating: ["x", "y"], ready: ["x", "y"] })],
      [],
    ],
    [
      "two pressed models, one free node with room for one: the first by name only",
      [
        host({ vramBytes: 8 * GB }),
        node("h", 8, { modelsOnDisk: [m("k", 5)], assigned: "k", hosting: true, ready: ["k"], demand: [busy("k")] }),
        node("b", 8, { modelsOnDisk: [m("m", 5), m("k", 5)] }),
      ],
      [{ model: "k", node: "b" }],
    ],
  ])("%s", (_, views, expected) => expect(replicasToAdd(views, catalog(views))).toEqual(expected));

  test("every node computes the same answer, whatever order it lists the views in", () => {
    const views = [host(), node("c", 16, { modelsOnDisk: [m("m", 5)] }), node("b", 16), node("d", 8, { modelsOnDisk: [m("m", 5)] })];
    const answers = [views, [...views].reverse(), [views[2]!, views[0]!, views[3]!, views[1]!]].map((v) => replicasToAdd(v, catalog(v)));
    expect(answers[1]).toEqual(answers[0]!);
    expect(answers[2]).toEqual(answers[0]!);
  });
});

describe("replicas and the group's own rules", () => {
  const views: NodeView[] = [host(), node("b", 32, { modelsOnDisk: [m("m", 5)], assigned: "m", ready: ["m"], replicating: ["m"] })];
  test("a replica with more memory is not elected host, nor does it change status, host or served-by", () => {
    const [entry] = catalog(views);
    expect(entry).toMatchObject({ host: "a", servedBy: "a", status: "ready" });
    expect(entry!.servers).toContain("b");
  });
  test("a model served by a replica alone reads as unloaded: its group is gone, the replica is no host", () => {
    const [entry] = catalog([node("b", 32, { modelsOnDisk: [m("m", 5)], ready: ["m"], replicating: ["m"] })]);
    expect(entry).toMatchObject({ host: undefined, servedBy: undefined, status: "unloaded" });
  });
});

describe("replicaRelease", () => {
  const NOW = 1_000_000;
  const IDLE = 300_000;
  const held = (model: string, agoMs: number, isBusy = false): HeldReplica => ({ model, lastUseMs: NOW - agoMs, busy: isBusy });
  const replica = (over: Partial<NodeView> = {}) => node("b", 16, { modelsOnDisk: [m("m", 5)], ready: ["m"], replicating: ["m"], ...over });
  test.each<[string, NodeView[], HeldReplica[], ReturnType<typeof replicaRelease>]>([
    ["used lately: kept", [host(), replica()], [held("m", 1_000)], []],
    ["no request for the idle time: released", [host(), replica()], [held("m", IDLE)], [{ model: "m", why: "idle" }]],
    ["idle but a request in flight: kept", [host(), replica()], [held("m", IDLE * 2, true)], []],
    [
      "its own model needs the memory (it was assigned one and hosts it): released at once",
      [host(), replica({ modelsOnDisk: [m("m", 5), m("big", 10)], assigned: "big", hosting: true })],
      [held("m", 1_000)],
      [{ model: "m", why: "needs-capacity" }],
    ],
    [
      "its group's model waits for memory (needs-capacity): released at once",
      [host(), replica({ modelsOnDisk: [m("m", 5), m("huge", 40)], assigned: "huge" })],
      [held("m", 1_000)],
      [{ model: "m", why: "needs-capacity" }],
    ],
    [
      "its own model fits beside it: kept",
      [host(), replica({ modelsOnDisk: [m("m", 5), m("small", 2)], assigned: "small", hosting: true, ready: ["m", "small"] })],
      [held("m", 1_000)],
      [],
    ],
    [
      "two replicas, room for one: the least recently used goes",
      [host(), node("h", 24, { assigned: "k", hosting: true, ready: ["k"], modelsOnDisk: [m("k", 5)] }), replica({ vramBytes: 15 * GB, ready: ["m", "k", "own"], replicating: ["m", "k"], assigned: "own", hosting: true, modelsOnDisk: [m("m", 5), m("k", 5), m("own", 5)] })],
      [held("m", 1_000), held("k", 5_000)],
      [{ model: "k", why: "needs-capacity" }],
    ],
    [
      "the node now hosts the model for its group (the host left): no longer a replica, the server stays",
      [replica({ assigned: "m", hosting: true })],
      [held("m", 1_000)],
      [{ model: "m", why: "hosted" }],
    ],
    ["a spare of the model's own group holding a replica: kept", [host(), replica({ assigned: "m" })], [held("m", 1_000)], []],
  ])("%s", (_, views, replicas, expected) => {
    const self = views.find((v) => v.nodeId === "b")!;
    expect(replicaRelease(self, views, catalog(views), replicas, NOW, IDLE)).toEqual(expected);
  });
  test("no add-release loop: a node the release side drops replicas on is never the add side's pick", () => {
    // heldBytes counts none of "huge" for b (outside its plan), so b reads as free; its model still wants the memory.
    const before = [host(), outsideHuge(), hugeHost()];
    expect(replicasToAdd(before, catalog(before))).toEqual([]);
    const holding = [host(), outsideHuge({ ready: ["m"], replicating: ["m"] }), hugeHost()];
    expect(replicaRelease(holding[1]!, holding, catalog(holding), [held("m", 1_000)], NOW, IDLE)).toEqual([{ model: "m", why: "needs-capacity" }]);
  });
});

describe("announcement fields", () => {
  const base = fakeAnnouncement("n1");
  test.each([
    ["absent (an older node): none, takes none", {}, [], false],
    ["listed", { replicating: ["m"], takesReplicas: true }, ["m"], true],
    ["junk: dropped on its own, the peer kept", { replicating: "m", takesReplicas: "yes" }, [], false],
    ["over the bound: dropped on its own", { replicating: Array.from({ length: 17 }, (_, i) => `m${i}`) }, [], false],
  ] as const)("%s", (_, extra, replicating, takes) => {
    const { replicating: _r, takesReplicas: _t, ...rest } = base;
    const parsed = AnnouncementSchema.parse({ ...rest, ...extra });
    expect(parsed.replicating).toEqual([...replicating]);
    expect(parsed.takesReplicas).toBe(takes);
  });
});

describe("demandList: what a peer announced of its slots, as the keeper reads it", () => {
  test.each([
    ["absent", undefined, undefined],
    ["not a list", { model: "m" }, undefined],
    ["entries that read", [{ model: "m", slots: 1, inFlight: 1, queued: 2, waitMs: 300 }], [{ model: "m", slots: 1, inFlight: 1, queued: 2, waitMs: 300 }]],
    ["junk entries dropped, the rest kept", [null, 7, { model: 1, queued: 1, waitMs: 1 }, { model: "m", queued: "2", waitMs: 0 }, { model: "m", queued: Infinity, waitMs: 0 }, { model: "k", queued: 0, waitMs: 0 }], [{ model: "k", queued: 0, waitMs: 0 }]],
  ] as const)("%s", (_, value, expected) => expect(demandList(value)).toEqual(expected as never));
  test("bounded: a long list is cut", () => expect(demandList(Array.from({ length: 10_000 }, () => ({ model: "m", queued: 0, waitMs: 0 })))!.length).toBeLessThanOrEqual(256));
});
