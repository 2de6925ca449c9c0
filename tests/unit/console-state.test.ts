/** What the console shows, worked out from what a node knows: tables of cases. */
import { describe, expect, test } from "bun:test";
import { CONSOLE_LIMITS, type ConsoleNode } from "../../console/protocol.ts";
import { LogRing } from "../../base/log-ring.ts";
import { catalog, type NodeView } from "../../placement/catalog.ts";
import { AnnouncementSchema, type Announcement } from "../../mesh/messages.ts";
import { opener } from "../../commands/open.ts";
import { nodeView } from "../../node/model-fields.ts";
import { consoleState, groupOf, rememberGone, type ConsoleInput, type ConsolePeer } from "../../node/console-state.ts";
import { stateDue, stateKey } from "../../router/console/console-feed.ts";

const GIB = 2 ** 30;
const id = (c: string) => c.repeat(64);

function announcement(nodeId: string, over: Partial<Announcement> = {}): Announcement {
  return AnnouncementSchema.parse({
    nodeId,
    addresses: ["127.0.0.1:4000"],
    instance: "i",
    seq: 1,
    role: "worker",
    vramBytes: 8 * GIB,
    ramBytes: 16 * GIB,
    modelsOnDisk: [],
    serving: [],
    apiPort: 9337,
    lastRequest: {},
    meshVersion: "0.1.0",
    llamaBuild: "b1",
    rpcProtocol: "3.0.0",
    ...over,
  });
}

/** Views as the node makes them from announcements. */
const view = (a: Announcement): NodeView => nodeView(a.nodeId, a.vramBytes, a);

const peer = (a: Announcement, over: Partial<ConsolePeer> = {}): ConsolePeer => ({ announcement: a, lastSeenMsAgo: 100, rttMs: 1, quicPath: "direct", tunnel: { in: 0, out: 0, direct: false }, standing: { standing: "member" }, ...over });

function input(self: Announcement, peers: ConsolePeer[], over: Partial<ConsoleInput> = {}): ConsoleInput {
  const views = [self, ...peers.map((p) => p.announcement)].map(view);
  return { now: 1_000_000, version: "0.1.0", heartbeatMs: 2_000, self, peers, views, catalog: catalog(views), local: [], loadingHere: new Set(), loadingSince: new Map(), gone: [], trust: { state: "unanchored" }, ...over };
}

const model = (name: string, need: number, more: object = {}) => ({ name, size: need / 2, need, type: "llm", quant: "Q8_0", ...more });

describe("consoleState", () => {
  test("a split over two nodes: host and worker with shares in proportion to memory, and the memory each gives", () => {
    const a = announcement(id("a"), { vramBytes: 6 * GIB, modelsOnDisk: [model("big", 9 * GIB)], assigned: "big", hosting: true, serving: ["big"], layout: [id("b")], startedAt: 1_000_000 - 42_000 });
    const b = announcement(id("b"), { vramBytes: 3 * GIB, assigned: "big" });
    const s = consoleState(input(a, [peer(b)]));
    const m = s.models.find((x) => x.name === "big")!;
    expect(m.status).toBe("ready");
    expect(m.members).toEqual([
      { id: id("a"), role: "host", share: 6 / 9 },
      { id: id("b"), role: "worker", share: 3 / 9 },
    ]);
    expect(m).toMatchObject({ type: "llm", quant: "Q8_0", onThisNode: true, loadedHere: true, host: id("a") });
    const [na, nb] = s.nodes;
    expect(na).toMatchObject({ self: true, quicPath: "self", rttMs: null, uptimeS: 42, roles: [{ model: "big", role: "host" }], memoryUsedBytes: 6 * GIB });
    expect(nb).toMatchObject({ self: false, quicPath: "direct", uptimeS: null, roles: [{ model: "big", role: "worker" }], memoryUsedBytes: 3 * GIB });
  });

  test("each node's iroh line and relay, as it announced them (a node that says no line runs 0.35)", () => {
    const a = announcement(id("a"), { transport: "iroh1", relayUrl: "https://relay.example.org/" });
    const old = announcement(id("b"));
    const [na, nb] = consoleState(input(a, [peer(old)])).nodes;
    expect(na).toMatchObject({ line: "iroh1", relayUrl: "https://relay.example.org/" });
    expect(nb).toMatchObject({ line: "iroh035", relayUrl: null });
  });

  const cases: { name: string; self: Partial<Announcement>; peers: Partial<Announcement>[]; over?: Partial<ConsoleInput>; want: object }[] = [
    { name: "on disk, nobody assigned: unloaded", self: { modelsOnDisk: [model("m", GIB)] }, peers: [], want: { status: "unloaded", host: null, members: [] } },
    {
      name: "loaded on demand by this node's pool: loading, with how long",
      self: { modelsOnDisk: [model("m", GIB)] },
      peers: [],
      over: { loadingHere: new Set(["m"]), loadingSince: new Map([["m", 1_000_000 - 7_400]]) },
      want: { status: "loading", loadingForS: 7 },
    },
    {
      name: "the group lacks memory: needs capacity, and how much",
      self: { vramBytes: 2 * GIB, modelsOnDisk: [model("m", 5 * GIB)], assigned: "m" },
      peers: [{ vramBytes: 1 * GIB, assigned: "m" }],
      want: { status: "needs-capacity", missingBytes: 2 * GIB },
    },
    {
      name: "a member fetching it: fetching, with its progress",
      self: { assigned: "m", seeds: [{ name: "m", ref: "org/repo:Q8_0" }], fetching: { model: "m", bytes: 10, total: 40, from: "hub" } },
      peers: [],
      want: { status: "fetching", fetch: { node: id("a"), bytes: 10, total: 40, from: "hub" }, origin: "org/repo:Q8_0", onThisNode: false },
    },
    {
      name: "its host's load failed: failed, with why",
      self: { modelsOnDisk: [model("m", GIB)], assigned: "m", hosting: true, loadFailed: { model: "m", error: "bad file", retryInS: 20 } },
      peers: [],
      want: { status: "failed", failure: { error: "bad file", retryInS: 20 } },
    },
    {
      name: "a member standing by beside a host running alone",
      self: { modelsOnDisk: [model("m", GIB)], assigned: "m", hosting: true, serving: ["m"], layout: [] },
      peers: [{ modelsOnDisk: [model("m", GIB)], assigned: "m" }],
      want: { status: "ready", members: [{ id: id("a"), role: "host", share: 1 }, { id: id("b"), role: "standby", share: 0 }] },
    },
  ];
  for (const c of cases) {
    test(c.name, () => {
      const self = announcement(id("a"), c.self);
      const peers = c.peers.map((p, i) => peer(announcement(id(String.fromCharCode(98 + i)), p)));
      expect(consoleState(input(self, peers, c.over)).models.find((m) => m.name === "m")).toMatchObject(c.want);
    });
  }

  test("two nodes serving a model on demand, in no group: both run it whole, and its memory counts on both", () => {
    const self = announcement(id("a"), { modelsOnDisk: [model("m", GIB)], serving: ["m"] });
    const other = announcement(id("b"), { modelsOnDisk: [model("m", GIB)], serving: ["m"] });
    const s = consoleState(input(self, [peer(other)]));
    expect(s.models[0]!.members).toEqual([
      { id: id("a"), role: "host", share: 1 },
      { id: id("b"), role: "host", share: 1 },
    ]);
    expect(s.nodes.map((n) => n.memoryUsedBytes)).toEqual([GIB, GIB]);
  });

  test("a peer not heard from for over two heartbeats is silent; within them, up", () => {
    const self = announcement(id("a"));
    const s = consoleState(input(self, [peer(announcement(id("b")), { lastSeenMsAgo: 4_400 }), peer(announcement(id("c")), { lastSeenMsAgo: 4_600 })]));
    expect(s.nodes.map((n) => n.state)).toEqual(["up", "up", "silent"]);
  });

  test("before the mesh is up: no self and no nodes", () => {
    const self = announcement(id("a"));
    const s = consoleState({ ...input(self, []), self: undefined });
    expect(s.self).toBeNull();
    expect(s.nodes).toEqual([]);
  });

  test("no secret of the node is in what it shows: the announcement's fields only", () => {
    const self = announcement(id("a"), { signedDirect: { port: 4433, certSha256: "f".repeat(64) } });
    const text = JSON.stringify(consoleState(input(self, [])));
    expect(text).not.toContain("f".repeat(64));
    expect(consoleState(input(self, [])).nodes[0]!.offersDirect).toBe(true);
  });
});

test("groupOf: a host still loading a split runs over the rest of its group, shares by memory", () => {
  const views: NodeView[] = [
    { nodeId: "h", vramBytes: 3, modelsOnDisk: [], assigned: "m", ready: [], idle: [], hosting: true },
    { nodeId: "w", vramBytes: 1, modelsOnDisk: [], assigned: "m", ready: [], idle: [] },
  ];
  const m = { name: "m", source: undefined, sizeBytes: 1, needBytes: 4, nodesOnDisk: [], copyFrom: [], nodesServing: ["h", "w"], capacityBytes: 4, host: "h", servedBy: undefined, servers: [], split: true, idle: false, status: "loading" as const };
  expect(groupOf(m, views)).toEqual([
    { id: "h", role: "host", share: 0.75 },
    { id: "w", role: "worker", share: 0.25 },
  ]);
});

test("groupOf: replicas show as such, in the group (a standby's) or outside it", () => {
  const views: NodeView[] = [
    { nodeId: "h", vramBytes: 3, modelsOnDisk: [], assigned: "m", ready: ["m"], idle: [], hosting: true },
    { nodeId: "s", vramBytes: 3, modelsOnDisk: [], assigned: "m", ready: ["m"], idle: [], replicating: ["m"] },
    { nodeId: "o", vramBytes: 3, modelsOnDisk: [], assigned: "k", ready: ["k", "m"], idle: [], replicating: ["m"] },
  ];
  const m = { name: "m", source: undefined, sizeBytes: 1, needBytes: 1, nodesOnDisk: [], copyFrom: [], nodesServing: ["h", "s"], capacityBytes: 6, host: "h", servedBy: "h", servers: ["h", "o", "s"], split: false, idle: false, status: "ready" as const };
  expect(groupOf(m, views)).toEqual([
    { id: "h", role: "host", share: 1 },
    { id: "s", role: "replica", share: 1 },
    { id: "o", role: "replica", share: 1 },
  ]);
});

describe("rememberGone", () => {
  const node = (nodeId: string, state: ConsoleNode["state"], lastSeenMsAgo: number) => ({ id: nodeId, state, lastSeenMsAgo, roles: [{ model: "m", role: "worker" }], memoryUsedBytes: 5 }) as unknown as ConsoleNode;
  const cases: { name: string; before: ConsoleNode[]; present: string[]; dt: number; want: [string, number][] }[] = [
    { name: "a node that left is gone, its time since last seen counting on", before: [node("a", "up", 0), node("b", "up", 300)], present: ["a"], dt: 1_000, want: [["b", 1_300]] },
    { name: "a node back in the mesh is no longer gone", before: [node("b", "gone", 5_000)], present: ["b"], dt: 1_000, want: [] },
    { name: "forgotten after goneForMs", before: [node("b", "gone", CONSOLE_LIMITS.goneForMs - 10)], present: [], dt: 100, want: [] },
  ];
  for (const c of cases) {
    test(c.name, () => {
      const gone = rememberGone(c.before, new Set(c.present), 10_000 + c.dt, 10_000);
      expect(gone.map((n) => [n.id, n.lastSeenMsAgo])).toEqual(c.want);
      for (const n of gone) expect(n).toMatchObject({ state: "gone", roles: [], memoryUsedBytes: 0 });
    });
  }
  test(`at most ${CONSOLE_LIMITS.goneNodes}, the most recent kept`, () => {
    const before = Array.from({ length: 200 }, (_, i) => node(`n${i}`, "gone", i));
    const gone = rememberGone(before, new Set(), 1, 0);
    expect(gone.length).toBe(CONSOLE_LIMITS.goneNodes);
    expect(gone[0]!.id).toBe("n0");
  });
});

describe("state pushes", () => {
  const self = announcement(id("a"), { modelsOnDisk: [model("m", GIB)] });
  const base = consoleState(input(self, [peer(announcement(id("b")))]));
  const moved = { ...base, at: base.at + 900, nodes: base.nodes.map((n) => ({ ...n, rttMs: 7, lastSeenMsAgo: 1_500, uptimeS: 99 })) };
  const changed = { ...base, models: base.models.map((m) => ({ ...m, status: "loading" as const })) };
  const gone = { ...base, nodes: base.nodes.map((n, i) => (i === 1 ? { ...n, state: "silent" as const } : n)) };
  test.each([
    ["figures that move by themselves: same key", moved, true],
    ["a model's status: another key", changed, false],
    ["a node gone silent: another key", gone, false],
  ])("%s", (_name, other, same) => {
    expect(stateKey(other) === stateKey(base)).toBe(same);
  });
  test.each([
    ["first state", undefined, 0, true],
    ["same key, 1 s later", { key: "k", at: 0 }, 1_000, false],
    ["same key, 5 s later", { key: "k", at: 0 }, 5_000, true],
  ] as const)("due: %s", (_n, last, now, want) => expect(stateDue("k", last, now)).toBe(want));
  test("due: another key at once", () => expect(stateDue("k2", { key: "k", at: 0 }, 1)).toBe(true));
});

describe("LogRing", () => {
  test("keeps the last lines, numbered, with long text cut and undefined fields left out", () => {
    const ring = new LogRing(3);
    const heard: number[] = [];
    const stop = ring.subscribe((l) => heard.push(l.seq));
    for (let i = 0; i < 5; i++) ring.add("info", `line ${i}`, { i, gone: undefined });
    stop();
    ring.add("warn", "x".repeat(5_000));
    expect(heard).toEqual([1, 2, 3, 4, 5]);
    expect(ring.recent().map((l) => l.seq)).toEqual([4, 5, 6]);
    expect(ring.recent()[0]!.fields).toEqual({ i: 3 });
    expect(ring.recent()[2]!.msg.length).toBeLessThan(2_100);
  });
});

test.each([
  ["linux", { DISPLAY: ":0" }, "xdg-open"],
  ["linux", { WAYLAND_DISPLAY: "wayland-0" }, "xdg-open"],
  ["linux", {}, undefined],
  ["darwin", {}, "open"],
])("opener on %s %o: %s", (platform, env, want) => expect(opener(platform, env)).toBe(want));

describe("standing under the roster", () => {
  test("this node's own standing, each peer's as this node checked it, and what a guest claims to serve", () => {
    const me = announcement(id("a"), { modelsOnDisk: [model("m", GIB)], assigned: "m", hosting: true, serving: ["m"] });
    const owner = announcement(id("b"));
    const guest = announcement(id("g"), { serving: ["m"], vramBytes: 1024 * GIB });
    const s = consoleState(
      input(me, [peer(owner, { standing: { standing: "vouched" } }), peer(guest, { standing: { standing: "guest", name: "mallory", passId: "0".repeat(32), expiresAt: 5 } })], {
        trust: { state: "vouched", roster: "r".repeat(64), closed: true },
      }),
    );
    expect(s.trust).toEqual({ state: "vouched", roster: "r".repeat(64), closed: true, refused: null });
    const byId = (x: string) => s.nodes.find((n) => n.id === x)!;
    expect([byId(id("a")).standing, byId(id("b")).standing, byId(id("g")).standing]).toEqual(["vouched", "vouched", "guest"]);
    expect(byId(id("g")).guest).toEqual({ name: "mallory", expiresAt: 5 });
    expect(byId(id("g")).claimsServing).toEqual(["m"]);
    expect(byId(id("a")).claimsServing).toEqual([]);
  });

  test("an unanchored node and its members", () => {
    const s = consoleState(input(announcement(id("a")), [peer(announcement(id("b")))]));
    expect(s.trust.state).toBe("unanchored");
    expect(s.nodes.map((n) => n.standing)).toEqual(["member", "member"]);
  });
});
