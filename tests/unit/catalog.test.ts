import { describe, expect, test } from "bun:test";
import { allocate, type Assignment } from "../../placement/allocation.ts";
import { catalog, puller, splitCandidates, type NodeModel, type NodeView } from "../../placement/catalog.ts";
import { kvCacheBytes, modelNeedBytes } from "../../models/model-need.ts";
import { elect, splitPlan } from "../../placement/election.ts";

const GB = 1e9;
const model = (name: string, gb: number, extra: Partial<NodeModel> = {}): NodeModel => ({ name, sizeBytes: gb * GB, needBytes: gb * GB * 1.2, ...extra });
const node = (nodeId: string, vramGb: number, over: Partial<NodeView> = {}): NodeView => ({ nodeId, vramBytes: vramGb * GB, modelsOnDisk: [], assigned: undefined, ready: [], idle: [], ...over });

describe("election", () => {
  test.each([
    ["nobody", [], undefined],
    ["one node", [{ nodeId: "a", vramBytes: 1 }], "a"],
    ["most memory wins", [{ nodeId: "a", vramBytes: 8 }, { nodeId: "b", vramBytes: 24 }, { nodeId: "c", vramBytes: 16 }], "b"],
    ["a tie goes to the larger id", [{ nodeId: "a", vramBytes: 8 }, { nodeId: "c", vramBytes: 8 }, { nodeId: "b", vramBytes: 8 }], "c"],
    ["a tie goes first to the node already hosting", [{ nodeId: "a", vramBytes: 8, hosting: true }, { nodeId: "c", vramBytes: 8 }], "a"],
    ["a server that answers beats a claim to host (a load not started yet)", [{ nodeId: "z", vramBytes: 8, hosting: true }, { nodeId: "a", vramBytes: 8, ready: true }], "a"],
    ["more memory beats hosting", [{ nodeId: "a", vramBytes: 8, hosting: true }, { nodeId: "b", vramBytes: 9 }], "b"],
    ["a node that cannot get the file hosts only if nobody else can", [{ nodeId: "z", vramBytes: 64, canHost: false }, { nodeId: "a", vramBytes: 8 }], "a"],
    ["...and then it does (it fetches first)", [{ nodeId: "z", vramBytes: 64, canHost: false }], "z"],
    ["a node that can never get the file (no file, no fetching) never hosts", [{ nodeId: "z", vramBytes: 64, canHost: false, canGet: false }, { nodeId: "a", vramBytes: 8, canHost: false }], "a"],
    ["...even alone: no host", [{ nodeId: "z", vramBytes: 64, canHost: false, canGet: false }], undefined],
    [
      "a group with a node of an older version elects as it does, so every node picks the same host",
      [{ nodeId: "z", vramBytes: 64, canHost: false, canGet: false }, { nodeId: "a", vramBytes: 8, canHost: false, hostsOnlyGetters: false }],
      "z",
    ],
  ] as const)("%s", (_, group, host) => expect(elect(group)).toBe(host));

  test.each([
    ["fits on the host: no RPC", [{ nodeId: "a", vramBytes: 24 }, { nodeId: "b", vramBytes: 8 }], 10, { host: "a", workers: [] }],
    ["too big for the host: the rest are workers", [{ nodeId: "a", vramBytes: 8 }, { nodeId: "c", vramBytes: 24 }, { nodeId: "b", vramBytes: 8 }], 30, { host: "c", workers: ["a", "b"] }],
    ["empty group", [], 1, undefined],
  ] as const)("splitPlan: %s", (_, group, need, plan) => expect(splitPlan(group, need)).toEqual(plan as never));
});

describe("catalog", () => {
  test("one model, one node that serves it and is ready", () => {
    const [m] = catalog([node("a", 24, { modelsOnDisk: [model("qwen", 5)], assigned: "qwen", ready: ["qwen"] })]);
    expect(m).toMatchObject({ name: "qwen", nodesOnDisk: ["a"], nodesServing: ["a"], host: "a", status: "ready", capacityBytes: 24 * GB });
  });
  test.each([
    ["nobody assigned: unloaded", [node("a", 24, { modelsOnDisk: [model("m", 5)] })], "unloaded", undefined],
    ["assigned, host not up yet: loading", [node("a", 24, { modelsOnDisk: [model("m", 5)], assigned: "m" })], "loading", "a"],
    ["the group has too little memory: needs-capacity", [node("a", 4, { modelsOnDisk: [model("m", 5)], assigned: "m" })], "needs-capacity", "a"],
    [
      "its host gone, the group left with a member that cannot get the file (--fetch off): no host, needs-capacity",
      [node("a", 24, { modelsOnDisk: [model("m", 5)] }), node("b", 24, { fetches: false, assigned: "m" })],
      "needs-capacity",
      undefined,
    ],
    ["...and when no holder is left to say its size", [node("b", 24, { fetches: false, assigned: "m" })], "needs-capacity", undefined],
    [
      "two nodes together have enough; the bigger hosts",
      [node("a", 4, { modelsOnDisk: [model("m", 5)], assigned: "m" }), node("b", 4.5, { modelsOnDisk: [model("m", 5)], assigned: "m", ready: ["m"] })],
      "ready",
      "b",
    ],
  ] as const)("%s", (_, nodes, status, host) => {
    const [m] = catalog(nodes);
    expect(m!.status).toBe(status);
    expect(m!.host).toBe(host);
  });
  test.each<[string, NodeView[], string[]]>([
    ["nobody serves it: no servers", [node("a", 24, { modelsOnDisk: [model("m", 5)], assigned: "m" })], []],
    ["its host alone", [node("a", 24, { modelsOnDisk: [model("m", 5)], assigned: "m", ready: ["m"] })], ["a"]],
    [
      "its host first, then every other node whose server answers (replicas, loads on demand) by id",
      [node("z", 4, { modelsOnDisk: [model("m", 1)], ready: ["m"] }), node("b", 24, { modelsOnDisk: [model("m", 1)], assigned: "m", ready: ["m"] }), node("c", 4, { ready: ["m", "m"] })],
      ["b", "c", "z"],
    ],
    [
      "a new host still loading: the member still serving comes first, the host is not listed until it answers",
      [node("a", 8, { modelsOnDisk: [model("m", 1)], assigned: "m", ready: ["m"] }), node("b", 24, { modelsOnDisk: [model("m", 1)], assigned: "m" }), node("c", 4, { ready: ["m"] })],
      ["a", "c"],
    ],
    [
      "its own servers down (the host gone or reloading): the replica still answers",
      [node("a", 24, { modelsOnDisk: [model("m", 1)], assigned: "m" }), node("c", 4, { modelsOnDisk: [model("m", 1)], ready: ["m"], replicating: ["m"] })],
      ["c"],
    ],
  ])("servers: %s", (_, nodes, servers) => {
    expect(catalog(nodes)[0]!.servers).toEqual(servers);
    // Every node lists them alike, whatever order it hears the announcements in.
    expect(catalog([...nodes].reverse())[0]!.servers).toEqual(servers);
  });
  test("seeded models nobody has yet are listed with their source; the list is sorted by name", () => {
    const list = catalog([node("a", 8, { modelsOnDisk: [model("zeta", 1)] }), node("b", 8, { seeds: [model("alpha", 3, { source: "https://example.invalid/alpha.gguf" })] })]);
    expect(list.map((m) => [m.name, m.nodesOnDisk, m.source])).toEqual([
      ["alpha", [], "https://example.invalid/alpha.gguf"],
      ["zeta", ["a"], undefined],
    ]);
  });
  test("a seed's source survives a node that has the file", () => {
    const [m] = catalog([node("a", 8, { modelsOnDisk: [model("alpha", 3)], seeds: [{ name: "alpha", sizeBytes: 0, needBytes: 0, source: "https://example.invalid/a.gguf" }] })]);
    expect(m).toMatchObject({ sizeBytes: 3 * GB, source: "https://example.invalid/a.gguf" });
  });
  test("need = (file + KV) with a margin; KV from the model's shape", () => {
    expect(modelNeedBytes(1000, 200)).toBe(1320);
    // 32 layers, 4096 context, 4096 wide with 32 heads of which 8 for K/V: 512 MiB at f16.
    expect(kvCacheBytes(32, 4096, 4096, 32, 8)).toBe(512 * 2 ** 20);
  });
});

describe("allocate", () => {
  type Case = [string, NodeView, NodeView[], NodeModel[], Assignment | undefined];
  const cases: Case[] = [
    [
      "1: a model that cannot run without me, even over one on my disk nobody serves",
      node("me", 10, { modelsOnDisk: [model("small", 2)] }),
      [node("a", 40, { modelsOnDisk: [model("big", 40)], assigned: "big" })],
      [],
      { model: "big", rule: 1, download: true },
    ],
    [
      "1 prefers a model on my disk",
      node("me", 30, { modelsOnDisk: [model("b", 30)] }),
      [node("x", 20, { modelsOnDisk: [model("a", 30)], assigned: "a" }), node("y", 20, { modelsOnDisk: [model("b", 30)], assigned: "b" })],
      [],
      { model: "b", rule: 1, download: false },
    ],
    [
      "1 does not apply when I would not be enough",
      node("me", 1, { modelsOnDisk: [model("small", 0.5)] }),
      [node("a", 10, { modelsOnDisk: [model("big", 40)], assigned: "big" })],
      [],
      { model: "small", rule: 2, download: false },
    ],
    [
      "--fetch off: never a model nobody serves that I would have to download (I would host what I cannot get)",
      node("me", 24, { fetches: false }),
      [node("a", 24, { modelsOnDisk: [model("m", 5), model("other", 5)], assigned: "other", ready: ["other"] })],
      [],
      { model: "other", rule: 5, download: true },
    ],
    [
      "--fetch off: still lends memory to a group that needs it",
      node("me", 30, { fetches: false }),
      [node("a", 20, { modelsOnDisk: [model("big", 30)], assigned: "big" })],
      [],
      { model: "big", rule: 1, download: true },
    ],
    ["--fetch off, alone with nothing on disk: nothing to take", node("me", 24, { fetches: false }), [node("a", 8, { modelsOnDisk: [model("m", 5)] })], [], undefined],
    [
      "a holder back after its host role passed to a --fetch off member: it takes its model again (rule 1: the group has no host)",
      node("me", 24, { modelsOnDisk: [model("m", 5), model("other", 5)] }),
      [node("b", 24, { fetches: false, assigned: "m" })],
      [],
      { model: "m", rule: 1, download: false },
    ],
    [
      "2: nobody serves it, it fits, it is on my disk",
      node("me", 24, { modelsOnDisk: [model("m", 5)] }),
      [node("a", 24, { modelsOnDisk: [model("other", 5)], assigned: "other", ready: ["other"] })],
      [],
      { model: "m", rule: 2, download: false },
    ],
    [
      "2: among several, the larger",
      node("me", 24, { modelsOnDisk: [model("m3", 3), model("m7", 7)] }),
      [],
      [],
      { model: "m7", rule: 2, download: false },
    ],
    [
      "2: equal sizes go by name",
      node("me", 24, { modelsOnDisk: [model("zed", 3), model("abc", 3)] }),
      [],
      [],
      { model: "abc", rule: 2, download: false },
    ],
    [
      "3: everything on my disk is served: join a split group to add capacity",
      node("me", 8, { modelsOnDisk: [model("m", 5)] }),
      [node("a", 4, { modelsOnDisk: [model("m", 5)], assigned: "m", ready: ["m"] }), node("b", 4, { assigned: "m" })],
      [],
      { model: "m", rule: 3, download: false },
    ],
    [
      "3 does not apply to a group whose host holds the model alone: nothing gained, so rule 5",
      node("me", 8, { modelsOnDisk: [model("m", 5), model("n", 1)] }),
      [node("a", 24, { modelsOnDisk: [model("m", 5)], assigned: "m", ready: ["m"] }), node("b", 24, { assigned: "n", ready: ["n"] })],
      [],
      { model: "m", rule: 5, download: false },
    ],
    [
      "4: nothing on my disk: a model nobody serves that I can fetch from a peer",
      node("me", 24),
      [node("a", 24, { modelsOnDisk: [model("m", 5), model("n", 6)], assigned: "n", ready: ["n"] })],
      [],
      { model: "m", rule: 4, download: true },
    ],
    [
      "4: or from its source URL",
      node("me", 24),
      [],
      [model("seeded", 5, { source: "https://example.invalid/s.gguf" })],
      { model: "seeded", rule: 4, download: true },
    ],
    [
      "4: nobody has it and no source: not assignable",
      node("me", 24),
      [],
      [model("ghost", 5)],
      undefined,
    ],
    [
      "4: everything is served and nothing is on my disk: a group to grow, after a download (larger first)",
      node("me", 1),
      [
        node("a", 20, { modelsOnDisk: [model("big", 30), model("mid", 10)], assigned: "big", ready: ["big"] }),
        node("b", 20, { assigned: "big" }),
        node("c", 6, { assigned: "mid" }),
        node("d", 6, { assigned: "mid", ready: ["mid"] }),
      ],
      [],
      { model: "big", rule: 4, download: true },
    ],
    [
      "5: nothing fits me, nothing I could complete: the largest model's group",
      node("me", 1),
      [node("a", 10, { modelsOnDisk: [model("big", 40), model("mid", 30)], assigned: "big" })],
      [],
      { model: "big", rule: 5, download: true },
    ],
  ];
  test.each(cases)("%s", (_, self, others, seeded, expected) => {
    expect(allocate(self, catalog([...others, self, node("seeder", 0, { seeds: seeded })]))).toEqual(expected);
  });

  test("a model unloaded for idleness is skipped until someone serves it again", () => {
    const me = node("me", 24, { modelsOnDisk: [model("sleepy", 5), model("small", 1)] });
    const parked = node("a", 24, { modelsOnDisk: [model("sleepy", 5)], idle: ["sleepy"] });
    expect(allocate(me, catalog([me, parked]))).toEqual({ model: "small", rule: 2, download: false });
    const woken = { ...parked, ready: ["sleepy"] };
    expect(catalog([me, woken]).find((m) => m.name === "sleepy")).toMatchObject({ idle: false, status: "ready", host: "a" });
  });
  test("an idle mark disbands the group: still idle while members are assigned, so none is pulled back in", () => {
    const parked = node("a", 24, { modelsOnDisk: [model("sleepy", 5)], idle: ["sleepy"] });
    const member = node("b", 24, { modelsOnDisk: [model("sleepy", 5)], assigned: "sleepy" });
    expect(catalog([parked, member])[0]).toMatchObject({ idle: true, nodesServing: ["b"] });
    expect(allocate(node("me", 24), catalog([parked, member, node("me", 24)]))).toBeUndefined();
  });
  test("a node started with --model chooses among those only", () => {
    const me = node("me", 24, { modelsOnDisk: [model("a", 5), model("b", 9)] });
    expect(allocate(me, catalog([me]), ["a"])).toEqual({ model: "a", rule: 2, download: false });
    expect(allocate(me, catalog([me]), ["nothing-known"])).toBeUndefined();
  });
  test("a bigger node does not take over a host that runs the model alone, with or without the file", () => {
    const serving = node("x", 8, { modelsOnDisk: [model("m", 1)], assigned: "m", ready: ["m"], hosting: true });
    const newcomer = node("z", 24, { assigned: "m" });
    expect(catalog([serving, newcomer])[0]).toMatchObject({ host: "x", servedBy: "x", status: "ready" });
    const arrived = { ...newcomer, modelsOnDisk: [model("m", 1)] };
    // With the file, it is a standby: moving a model that runs, and fits where it runs, gains nothing.
    expect(catalog([serving, arrived])[0]).toMatchObject({ host: "x", servedBy: "x", status: "ready" });
  });
  test("a member of another RPC major version adds no capacity and is no worker", () => {
    const host = node("h", 4, { modelsOnDisk: [model("m", 6)], assigned: "m", rpcProtocol: "7.0.0" });
    const same = node("a", 2, { assigned: "m", rpcProtocol: "7.1.0" });
    const other = node("b", 8, { assigned: "m", rpcProtocol: "8.0.0" });
    expect(splitCandidates([host, same, other], "m").map((c) => c.nodeId)).toEqual(["h", "a"]);
    expect(catalog([host, same, other])[0]).toMatchObject({ host: "h", capacityBytes: 6 * GB, status: "needs-capacity" });
  });
  test("nodes that see a model's need differently (their --ctx-size) all take the largest", () => {
    const a = node("a", 8, { modelsOnDisk: [model("m", 1, { needBytes: 3 * GB })] });
    const b = node("b", 8, { modelsOnDisk: [model("m", 1, { needBytes: 2 * GB })] });
    expect(catalog([a, b])[0]!.needBytes).toBe(3 * GB);
    expect(catalog([b, a])[0]!.needBytes).toBe(3 * GB);
  });
  test("a model loaded on demand by a node nobody assigned it to: ready, hosted there, not split", () => {
    const [m] = catalog([node("b", 8, { modelsOnDisk: [model("m", 1)], ready: ["m"] }), node("a", 8, { ready: ["m"] })]);
    expect(m).toMatchObject({ status: "ready", host: "a", nodesServing: [], split: false });
  });
  test("degenerate: one model, one node", () => {
    const me = node("me", 24, { modelsOnDisk: [model("only", 5)] });
    expect(allocate(me, catalog([me]))).toEqual({ model: "only", rule: 2, download: false });
  });
  test("degenerate: one model, many nodes: every newcomer joins its group", () => {
    const host = node("h", 24, { modelsOnDisk: [model("only", 5)], assigned: "only", ready: ["only"] });
    for (const vram of [1, 8, 64]) {
      const me = node(`n${vram}`, vram);
      expect(allocate(me, catalog([host, me]))?.model).toBe("only");
    }
  });
  test("degenerate: many models all solo: each newcomer takes one nobody serves", () => {
    const models = [model("a", 2), model("b", 3), model("c", 4)];
    const nodes: NodeView[] = [];
    for (const id of ["n1", "n2", "n3"]) {
      const me = node(id, 8, { modelsOnDisk: models });
      const got = allocate(me, catalog([...nodes, me]))!;
      nodes.push({ ...me, assigned: got.model, ready: [got.model] });
    }
    expect(nodes.map((n) => n.assigned)).toEqual(["c", "b", "a"]);
  });
  test("degenerate: one big model split plus small ones solo (the seeder asked for the big one)", () => {
    const files = [model("big", 20), model("small", 2)];
    const nodes: NodeView[] = [node("n1", 16, { modelsOnDisk: files, assigned: "big" })];
    const got: Assignment[] = [];
    for (const id of ["n2", "n3", "n4"]) {
      const me = node(id, 16, { modelsOnDisk: files });
      const a = allocate(me, catalog([...nodes, me]))!;
      got.push(a);
      nodes.push({ ...me, assigned: a.model });
    }
    expect(got).toEqual([
      { model: "big", rule: 1, download: false },
      { model: "small", rule: 2, download: false },
      { model: "big", rule: 3, download: false },
    ]);
    expect(catalog(nodes).find((m) => m.name === "big")?.split).toBe(true);
    const list = catalog(nodes);
    expect(list.find((m) => m.name === "big")).toMatchObject({ nodesServing: ["n1", "n2", "n4"], status: "loading" });
    expect(list.find((m) => m.name === "small")).toMatchObject({ nodesServing: ["n3"] });
  });
});

describe("puller: one member downloads a model nobody has, the others copy it from that member", () => {
  const m = "org/repo:Q8_0";
  const member = (id: string, vramGb: number, over: Partial<NodeView> = {}) => node(id, vramGb, { assigned: m, ...over });
  test.each<[string, NodeView[], string | undefined]>([
    ["nobody assigned: nobody pulls", [node("a", 8), node("b", 8, { assigned: "other" })], undefined],
    ["one member: it pulls", [member("a", 8), node("z", 64)], "a"],
    ["the most memory pulls (it will host, so it needs the file first)", [member("a", 8), member("b", 24), member("c", 16)], "b"],
    ["equal memory: the larger id", [member("a", 8), member("c", 8), member("b", 8)], "c"],
    ["a member that does not fetch never pulls", [member("a", 8), member("z", 64, { fetches: false })], "a"],
    ["...even when nobody else could", [member("z", 64, { fetches: false })], undefined],
    ["a member already pulling keeps the job when a bigger one joins", [member("a", 8, { fetching: m }), member("b", 64)], "a"],
    ["fetching another model is no claim", [member("a", 8, { fetching: "other" }), member("b", 64)], "b"],
    ["two pulling at once (they raced): election among them, the other stops", [member("a", 8, { fetching: m }), member("b", 16, { fetching: m }), member("c", 64)], "b"],
    ["a node pulling while not in the group (it left it) holds no claim", [node("a", 8, { fetching: m }), member("b", 16)], "b"],
  ])("%s", (_, nodes, expected) => expect(puller(nodes, m)).toBe(expected));

  test("the job passes on: the puller leaves (gone from the views) or gives up (leaves the group)", () => {
    const a = member("a", 64, { fetching: m });
    const b = member("b", 16);
    const c = member("c", 8);
    expect(puller([a, b, c], m)).toBe("a");
    expect(puller([b, c], m)).toBe("b");
    expect(puller([{ ...a, assigned: undefined, fetching: undefined }, b, c], m)).toBe("b");
    // While the next one pulls, the old one coming back does not take the job back.
    expect(puller([{ ...a, fetching: undefined }, { ...b, fetching: m }, c], m)).toBe("b");
  });

  test("the catalog names the puller only for a model nobody has, with a reference or source to pull from", () => {
    const seeded = (over: Partial<NodeModel>) => node("seeder", 0, { seeds: [{ name: m, sizeBytes: 0, needBytes: 0, ...over }] });
    const group = [member("a", 8), member("b", 16)];
    expect(catalog([...group, seeded({ ref: "org/repo:Q8_0" })])[0]).toMatchObject({ name: m, ref: "org/repo:Q8_0", puller: "b" });
    expect(catalog([...group, seeded({ source: "https://example.invalid/m.gguf" })])[0]).toMatchObject({ puller: "b" });
    expect(catalog([...group, seeded({})])[0]!.puller).toBeUndefined();
    // Someone has it under its content identity: the others copy it from there, nobody pulls.
    const has = member("c", 4, { modelsOnDisk: [model(m, 1, { identity: "x" })] });
    const [entry] = catalog([...group, has, seeded({ ref: "org/repo:Q8_0" })]);
    expect(entry).toMatchObject({ nodesOnDisk: ["c"], copyFrom: ["c"], ref: "org/repo:Q8_0" });
    expect(entry!.puller).toBeUndefined();
    // It has the files but no identity yet (hashing what it just pulled): it keeps the job, the others wait for it.
    const hashing = member("c", 4, { modelsOnDisk: [model(m, 1)] });
    expect(catalog([...group, hashing, seeded({ ref: "org/repo:Q8_0" })])[0]).toMatchObject({ copyFrom: [], puller: "c" });
    // A node outside the group has it, still hashing: nobody pulls a second copy meanwhile.
    const outside = node("e", 4, { modelsOnDisk: [model(m, 1)] });
    expect(catalog([...group, outside, seeded({ ref: "org/repo:Q8_0" })])[0]!.puller).toBeUndefined();
    // Two contents under the name: nobody's pull is waited for (a node's own reference is its operator's word).
    const other = member("d", 4, { modelsOnDisk: [model(m, 1, { identity: "y" })] });
    expect(catalog([...group, has, other, seeded({ ref: "org/repo:Q8_0" })])[0]!.puller).toBeUndefined();
  });

  test("every node works out the same puller and reference, whatever order it hears the announcements in", () => {
    const nodes = [
      member("a", 8, { seeds: [{ name: m, sizeBytes: 0, needBytes: 0, ref: "org/repo:Q8_0" }] }),
      member("b", 16, { seeds: [{ name: m, sizeBytes: 0, needBytes: 0, ref: "hf.co/org/repo:Q8_0" }] }),
      member("c", 16, { fetching: m }),
    ];
    const orders = [nodes, [...nodes].reverse(), [nodes[1]!, nodes[2]!, nodes[0]!]];
    const seen = orders.map((o) => catalog(o)[0]);
    for (const s of seen) expect(s).toMatchObject({ ref: "hf.co/org/repo:Q8_0", puller: "c" });
  });

  test("the reference of a node with the files beats a seed's: the exact files the mesh has", () => {
    const seed = (id: string, ref: string) => member(id, 8, { seeds: [{ name: m, sizeBytes: 0, needBytes: 0, ref }] });
    const has = (id: string, ref: string) => member(id, 8, { modelsOnDisk: [model(m, 1, { ref })] });
    const nodes = [seed("a", "aaa/first:Q8_0"), has("b", "org/repo/z.gguf"), has("c", "org/repo/y.gguf"), seed("d", "aaa/zero:Q8_0")];
    for (const order of [nodes, [...nodes].reverse()]) expect(catalog(order)[0]!.ref).toBe("org/repo/y.gguf");
  });

  test("a model known only by a reference is assignable: the node downloads it", () => {
    const me = node("me", 24);
    const seeder = node("s", 0, { seeds: [{ name: m, sizeBytes: 0, needBytes: 0, ref: "org/repo:Q8_0" }] });
    expect(allocate(me, catalog([me, seeder]), [m])).toEqual({ model: m, rule: 4, download: true });
  });
});

describe("content identity: a name stands for the bytes its holders agree on", () => {
  const held = (id: string, identity?: string) => node(id, 8, { modelsOnDisk: [model("m", 1, identity ? { identity } : {})] });
  test.each<[string, NodeView[], { identity?: string; copyFrom: string[]; contested?: true }]>([
    ["holders agree: that identity, every holder a source", [held("a", "x"), held("b", "x")], { identity: "x", copyFrom: ["a", "b"] }],
    ["a holder still hashing (none announced): the others", [held("a", "x"), held("b")], { identity: "x", copyFrom: ["a"] }],
    ["none announced: no identity, no source", [held("a"), held("b")], { copyFrom: [] }],
    ["two contents under the name: contested, no source", [held("a", "x"), held("b", "y"), held("c", "x")], { copyFrom: [], contested: true }],
    ["a node listing the model twice with two contents: contested", [node("a", 8, { modelsOnDisk: [model("m", 1, { identity: "x" }), model("m", 1, { identity: "y" })] })], { copyFrom: [], contested: true }],
  ])("%s", (_, views, want) => {
    const m = catalog(views).find((c) => c.name === "m")!;
    expect({ identity: m.identity, copyFrom: m.copyFrom, contested: m.contested }).toEqual({ identity: want.identity, copyFrom: want.copyFrom, contested: want.contested });
  });
});
