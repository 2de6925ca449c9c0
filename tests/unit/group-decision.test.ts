/**
 * Issue 45: the group decision is a pure function (`node/group-decision.ts`), tested here with case
 * tables over real catalogs and real elections (`placement/`), the hand-over deadlocks the lab
 * found among them. `GroupReconciler` only carries out what it decides.
 */
import { describe, expect, test } from "bun:test";
import { decideGroup, mustHandOver, type GroupAction, type GroupInput, type GroupState } from "../../node/group-decision.ts";
import { catalog, splitCandidates, type NodeView } from "../../placement/catalog.ts";
import { splitPlan } from "../../placement/election.ts";

// Node ids sort as their names: elections break ties by id.
const A = "a".repeat(64);
const B = "b".repeat(64);
const C = "c".repeat(64);
const M = { name: "m", sizeBytes: 100, needBytes: 140 };
const BIG = { name: "big", sizeBytes: 300, needBytes: 400 };
const OTHER = { name: "other", sizeBytes: 90, needBytes: 120 };

const view = (nodeId: string, over: Partial<NodeView> = {}): NodeView => ({ nodeId, vramBytes: 200, modelsOnDisk: [M], assigned: undefined, ready: [], idle: [], ...over });

/** The input for this node (`views[0]`) over these views, its files and server as given. */
function input(views: NodeView[], over: Partial<GroupInput> = {}): GroupInput {
  return {
    views,
    models: catalog(views),
    guest: false,
    explicit: [],
    peerCount: views.length - 1,
    candidates: undefined,
    hosts: [],
    plan: (v, model, need) => splitPlan(splitCandidates(v, model), need),
    hasFiles: true,
    server: undefined,
    loading: false,
    replicating: false,
    ...over,
  };
}
const state = (over: Partial<GroupState> = {}): GroupState => ({ assigned: undefined, hosting: false, loadedSplit: undefined, ...over });

describe("leaving, taking and moving", () => {
  test.each<[string, GroupState, GroupInput, GroupAction["do"], Record<string, unknown>]>([
    ["a guest in a group leaves it", state({ assigned: "m" }), input([view(A), view(B)], { guest: true }), "leave", { why: "guest" }],
    ["a guest with no group takes none", state(), input([view(A), view(B)], { guest: true }), "nothing", {}],
    ["the group's host let the model go idle: its members leave", state({ assigned: "m" }), input([view(A, { assigned: "m" }), view(B, { idle: ["m"] })]), "leave", { why: "idle" }],
    ["alone and given no --model: serves on demand, takes nothing", state(), input([view(A)]), "nothing", {}],
    ["alone with a --model: takes it", state(), input([view(A)], { explicit: ["m"], candidates: ["m"] }), "take", {}],
    ["with peers and no model: takes one", state(), input([view(A), view(B)]), "take", {}],
    ["a --model nobody knows: none to take yet", state(), input([view(A)], { explicit: ["other"], candidates: ["other"] }), "none-to-take", {}],
  ])("%s", (_, s, i, expected, fields) => {
    const action = decideGroup(s, i);
    expect(action.do).toBe(expected);
    expect(action).toMatchObject(fields);
  });

  test("a spare (in a group that needs neither its memory nor its files) moves to a model nobody serves that fits it", () => {
    // b hosts m alone; a, assigned m too, is neither its host nor a worker; other, on a's disk, is served by nobody.
    const views = [view(A, { assigned: "m", modelsOnDisk: [M, OTHER] }), view(B, { assigned: "m", hosting: true, ready: ["m"], vramBytes: 300 })];
    expect(decideGroup(state({ assigned: "m" }), input(views))).toEqual({ do: "take", choice: { model: "other", rule: 2, download: false }, from: "m" });
    // Nothing better to go to: it stays a member of its group.
    expect(decideGroup(state({ assigned: "m" }), input([view(A, { assigned: "m" }), views[1]!])).do).toBe("settle");
  });
});

describe("hosting the assigned model", () => {
  test.each<[string, GroupState, GroupInput, GroupAction]>([
    ["elected, no server: load over no workers", state({ assigned: "m" }), input([view(A, { assigned: "m", vramBytes: 300 }), view(B, { assigned: "m" })]), { do: "load", hosting: true, workers: "", reload: false }],
    ["elected but without the files whole: not hosting", state({ assigned: "m" }), input([view(A, { assigned: "m", vramBytes: 300 }), view(B, { assigned: "m" })], { hasFiles: false }), { do: "settle", hosting: false, workers: "" }],
    ["elected, a load under way: settle", state({ assigned: "m" }), input([view(A, { assigned: "m", vramBytes: 300 }), view(B, { assigned: "m" })], { loading: true }), { do: "settle", hosting: true, workers: "" }],
    ["elected, running over the layout wanted: settle", state({ assigned: "m", hosting: true, loadedSplit: "" }), input([view(A, { assigned: "m", vramBytes: 300 }), view(B, { assigned: "m" })], { server: { state: "ready" as const } }), { do: "settle", hosting: true, workers: "" }],
    [
      "elected, running over another layout (the group changed): reload",
      state({ assigned: "m", hosting: true, loadedSplit: B }),
      input([view(A, { assigned: "m", vramBytes: 300 }), view(B, { assigned: "m" })], { server: { state: "ready" as const } }),
      { do: "load", hosting: true, workers: "", reload: true },
    ],
    [
      "too big for either alone: the larger hosts over the other as a worker",
      state({ assigned: "big" }),
      input([view(B, { assigned: "big", modelsOnDisk: [BIG], vramBytes: 250 }), view(A, { assigned: "big", modelsOnDisk: [BIG], vramBytes: 200 })]),
      { do: "load", hosting: true, workers: A, reload: false },
    ],
    ["not elected, no server of ours: settle as a member", state({ assigned: "m" }), input([view(A, { assigned: "m" }), view(B, { assigned: "m", vramBytes: 300 })]), { do: "settle", hosting: false, workers: "" }],
  ])("%s", (_, s, i, expected) => expect(decideGroup(s, i)).toEqual(expected));
});

describe("handing over to the node elected instead", () => {
  // a runs m; b, with more memory, joined and is elected now.
  const running = (over: Partial<NodeView> = {}) => view(A, { assigned: "m", hosting: true, ready: ["m"], ...over });
  const elected = (over: Partial<NodeView> = {}) => view(B, { assigned: "m", vramBytes: 300, ...over });
  test.each<[string, GroupState, GroupInput, GroupAction["do"]]>([
    ["theirs does not answer yet: ours keeps serving (no gap)", state({ assigned: "m", hosting: true, loadedSplit: "" }), input([running(), elected()], { server: { state: "ready" as const } }), "settle"],
    ["theirs answers: ours goes", state({ assigned: "m", hosting: true, loadedSplit: "" }), input([running(), elected({ hosting: true, ready: ["m"] })], { server: { state: "ready" as const } }), "hand-over"],
    ["ours is already going: nothing more", state({ assigned: "m", hosting: true, loadedSplit: "" }), input([running(), elected({ hosting: true, ready: ["m"] })], { server: { state: "draining" as const } }), "settle"],
    ["--hosts leaves the elected node out: ours stays", state({ assigned: "m", hosting: true, loadedSplit: "" }), input([running(), elected({ hosting: true, ready: ["m"] })], { server: { state: "ready" as const }, hosts: [C] }), "settle"],
    ["a replica of ours is never handed over as the group's", state({ assigned: "m", hosting: true, loadedSplit: "" }), input([running(), elected({ hosting: true, ready: ["m"] })], { server: { state: "ready" as const }, replicating: true }), "settle"],
  ])("%s", (_, s, i, expected) => expect(decideGroup(s, i).do).toBe(expected));

  test.each<[string, string | undefined, { host: string; workers: string[] }, string | undefined, boolean]>([
    // The deadlocks the lab found: their split needs an rpc-server ours holds, and rpc-server serves one client at a time.
    ["their split uses this node's own rpc-server: ours goes at once", "", { host: B, workers: [A] }, undefined, true],
    ["their split uses a worker of ours: ours goes at once", C, { host: B, workers: [C] }, undefined, true],
    ["their host is a worker of ours: ours goes at once", B, { host: B, workers: [] }, undefined, true],
    ["their split needs nothing of ours: ours waits for theirs to answer", C, { host: B, workers: [] }, undefined, false],
    ["theirs answers: ours goes", "", { host: B, workers: [] }, B, true],
    ["this node is still the host: nothing to hand over", "", { host: A, workers: [B] }, A, false],
  ])("%s", (_, loadedSplit, plan, servedBy, expected) => {
    expect(mustHandOver(A, loadedSplit, plan, { servedBy }, { hosts: [], replicating: false })).toBe(expected);
  });
});
