/**
 * Placement rules over a running layout: a model that runs is not reloaded because a member joined
 * that it does not need; it moves only when it lost a worker, lacks the memory, or one member could
 * run it alone (every RPC hop saved). The catalog names the host that plan names.
 */
import { describe, expect, test } from "bun:test";
import { catalog, type ModelStatus, type NodeView } from "../../placement/catalog.ts";
import { splitPlan, type Candidate } from "../../placement/election.ts";
import { routeModel } from "../../placement/route.ts";
import { retryAfterFailureMs } from "../../node/host-schedule.ts";

const running = (nodeId: string, vramBytes: number, layout: string[]): Candidate => ({ nodeId, vramBytes, ready: true, hosting: true, layout });
const member = (nodeId: string, vramBytes: number, over: Partial<Candidate> = {}): Candidate => ({ nodeId, vramBytes, ...over });

describe("splitPlan keeps the layout that runs", () => {
  test.each<[string, Candidate[], number, { host: string; workers: string[] } | undefined]>([
    ["a member it does not need joins: kept", [running("c", 80, ["a", "b"]), member("a", 64), member("b", 48), member("d", 40)], 150, { host: "c", workers: ["a", "b"] }],
    ["a bigger member joins that cannot hold it alone: kept", [running("c", 80, ["a"]), member("a", 64), member("z", 96)], 140, { host: "c", workers: ["a"] }],
    ["a member joins that holds it alone: it moves there, no RPC", [running("c", 80, ["a"]), member("a", 64), member("z", 200)], 140, { host: "z", workers: [] }],
    ["its host could hold it alone (memory grew): it runs alone", [running("c", 200, ["a"]), member("a", 64)], 140, { host: "c", workers: [] }],
    ["a worker left: the rest of the group", [running("c", 80, ["a", "b"]), member("a", 64), member("d", 40)], 150, { host: "c", workers: ["a", "d"] }],
    ["the layout no longer has the memory (a larger context): the whole group", [running("c", 80, ["a"]), member("a", 64), member("d", 40)], 170, { host: "c", workers: ["a", "d"] }],
    ["running alone, a bigger member joins: kept alone", [running("a", 100, []), member("b", 200)], 90, { host: "a", workers: [] }],
    ["still loading (not ready): no layout to keep, the elected plan", [member("c", 80, { hosting: true, layout: ["a"] }), member("a", 64), member("z", 96)], 140, { host: "z", workers: ["a", "c"] }],
    ["a layout that names its host as a worker is not kept", [running("c", 80, ["c", "a"]), member("a", 64), member("z", 96)], 140, { host: "z", workers: ["a", "c"] }],
    ["a server up on a node that does not host it (leaving) is no layout", [member("c", 80, { ready: true, layout: ["a"] }), member("a", 64), member("z", 96)], 140, { host: "z", workers: ["a", "c"] }],
    ["a member of an older version (it elects afresh): so does everyone", [running("c", 80, ["a"]), member("a", 64), member("z", 96, { keepsLayouts: false })], 140, { host: "z", workers: ["a", "c"] }],
    ["a host of an older version (no layout announced) running a split: its whole group", [member("c", 80, { ready: true, hosting: true, keepsLayouts: false }), member("a", 64)], 140, { host: "c", workers: ["a"] }],
    ["nobody runs it: the most memory hosts, the rest are workers", [member("a", 8), member("c", 24), member("b", 8)], 30, { host: "c", workers: ["a", "b"] }],
  ])("%s", (_, group, need, plan) => expect(splitPlan(group, need)).toEqual(plan));
});

describe("the catalog names the host the plan keeps", () => {
  const view = (nodeId: string, vram: number, over: Partial<NodeView> = {}): NodeView => ({
    nodeId,
    vramBytes: vram,
    modelsOnDisk: [{ name: "m", sizeBytes: 100, needBytes: 140 }],
    assigned: "m",
    ready: [],
    idle: [],
    ...over,
  });
  test("a bigger member that joined does not take a running split's host away", () => {
    const [m] = catalog([view("c", 80, { ready: ["m"], hosting: true, layout: ["a"] }), view("a", 64), view("z", 96)]);
    expect(m).toMatchObject({ host: "c", servedBy: "c", status: "ready", split: true, nodesServing: ["a", "c", "z"] });
  });
  test("one that can hold it alone becomes its host; the old one serves until the new one answers", () => {
    const [m] = catalog([view("c", 80, { ready: ["m"], hosting: true, layout: ["a"] }), view("a", 64), view("z", 200)]);
    expect(m).toMatchObject({ host: "z", servedBy: "c", status: "ready", split: false });
  });
});

describe("a load that failed on its host", () => {
  const view = (nodeId: string, over: Partial<NodeView> = {}): NodeView => ({ nodeId, vramBytes: 200, modelsOnDisk: [{ name: "m", sizeBytes: 100, needBytes: 140 }], assigned: "m", ready: [], idle: [], ...over });
  const failed = { model: "m", error: "llama-server exited: invalid magic", retryInS: 20 };
  test.each<[string, NodeView[], ModelStatus]>([
    ["its host says its load failed: failed, not loading", [view("h", { hosting: true, loadFailed: failed }), view("a", { vramBytes: 100 })], "failed"],
    ["a member that is not its host says so: still loading", [view("h", { hosting: true }), view("a", { vramBytes: 100, loadFailed: failed })], "loading"],
    ["it failed for another model: loading", [view("h", { hosting: true, loadFailed: { ...failed, model: "other" } })], "loading"],
    ["another node still serves it: ready", [view("h", { hosting: true, loadFailed: failed }), view("a", { vramBytes: 100, ready: ["m"] })], "ready"],
    ["the group is short of memory anyway: needs-capacity", [view("h", { vramBytes: 100, hosting: true, loadFailed: failed })], "needs-capacity"],
  ])("%s", (_, views, status) => expect(catalog(views)[0]!.status).toBe(status));

  test("requests get 503 with the host's reason and its next try, and start no load", () => {
    const [m] = catalog([view("hostnode00aa", { hosting: true, loadFailed: failed })]);
    expect(m!.failure).toEqual({ error: failed.error, retryInS: 20 });
    const route = routeModel(m, { nodeId: "hostnode00aa", model: "m", known: true, hasFiles: true, ready: false, needBytes: 140, vramBytes: 200 }, false);
    expect(route).toEqual({ to: "unavailable", retryAfterS: 20, message: 'model "m" failed to load on its host hostnode00: llama-server exited: invalid magic; it tries again within 20 s' });
  });

  test("a request forwarded to the host of a failed model starts no load either", () => {
    const [m] = catalog([view("hostnode00aa", { hosting: true, loadFailed: failed })]);
    expect(routeModel(m, { nodeId: "hostnode00aa", model: "m", known: true, hasFiles: true, ready: false, needBytes: 140, vramBytes: 200 }, true).to).toBe("unavailable");
  });

  test.each([
    [1, 10_000],
    [2, 20_000],
    [3, 40_000],
    [6, 300_000],
    [40, 300_000],
  ])("after %i failures in a row the next try waits %i ms", (failures, ms) => expect(retryAfterFailureMs(failures)).toBe(ms));
});
