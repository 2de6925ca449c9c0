import { describe, expect, test } from "bun:test";
import { AFFINITY_MARGIN, announcedLoad, loadOf, pickServer, rankFor, type AnnouncedLoad, type ServerLoad } from "../../placement/pick-server.ts";

const IDS = ["node-a", "node-b", "node-c"];
const KEY = "u:alice";
// The servers in the order KEY prefers them: the tables speak of first, second and third.
const [first, second, third] = rankFor(KEY, IDS.map((nodeId) => ({ nodeId }))).map((s) => s.nodeId) as [string, string, string];
const slots = (n: number, inFlight = 0, queued = 0): AnnouncedLoad => ({ slots: n, inFlight, queued });

/** Servers from [id, outstanding, announced?] rows. */
const servers = (rows: [string, number, AnnouncedLoad?][]): ServerLoad[] => rows.map(([nodeId, outstanding, announced]) => ({ nodeId, outstanding, ...(announced ? { announced } : {}) }));

describe("with an affinity key", () => {
  test.each<[string, [string, number, AnnouncedLoad?][], string[], string | undefined]>([
    ["all idle: the key's first choice", [[first, 0], [second, 0], [third, 0]], [], first],
    ["its first choice busier, within the margin: still there (its cache)", [[first, AFFINITY_MARGIN - 1], [second, 0], [third, 0]], [], first],
    ["its first choice at the margin above the least: the least loaded", [[first, AFFINITY_MARGIN], [second, 0], [third, 0]], [], second],
    ["overloaded, two equally idle: the key's next choice among them", [[first, 5], [second, 0], [third, 0]], [], second],
    ["overloaded, the third least loaded: the third", [[first, 5], [second, 3], [third, 1]], [], third],
    ["a free slot by its announcement: there, however idle the others", [[first, 3, slots(4, 3)], [second, 0], [third, 0]], [], first],
    ["its slots full and over the margin: elsewhere", [[first, 0, slots(2, 2, 1)], [second, 0], [third, 0]], [], second],
    ["its announcement counts others' requests we do not see", [[first, 0, slots(1, 1, 4)], [second, 1], [third, 1]], [], second],
    ["we count more than it announced (a heartbeat late): our count", [[first, 4, slots(8, 0)], [second, 0], [third, 0]], [], first],
    ["its first choice avoided (it just failed): the next", [[first, 0], [second, 0], [third, 0]], [first], second],
    ["all avoided: none", [[first, 0], [second, 0]], [first, second], undefined],
    ["one server: that one", [[third, 9]], [], third],
    ["no servers: none", [], [], undefined],
  ])("%s", (_, rows, avoid, expected) => {
    expect(pickServer({ servers: servers(rows), key: KEY, avoid: new Set(avoid) })).toBe(expected);
  });
});

describe("without a key", () => {
  test.each<[string, [string, number, AnnouncedLoad?][], number, string]>([
    ["the least outstanding", [[first, 2], [second, 1], [third, 3]], 0, second],
    ["the least by announcement too", [[first, 0, slots(4, 3)], [second, 1], [third, 2]], 0, second],
    ["equals take turns: turn 0", [[first, 1], [second, 0], [third, 0]], 0, rankFor("", [second, third].map((nodeId) => ({ nodeId })))[0]!.nodeId],
    ["equals take turns: turn 1", [[first, 1], [second, 0], [third, 0]], 1, rankFor("", [second, third].map((nodeId) => ({ nodeId })))[1]!.nodeId],
    ["equals take turns: turn 2 comes round again", [[first, 1], [second, 0], [third, 0]], 2, rankFor("", [second, third].map((nodeId) => ({ nodeId })))[0]!.nodeId],
  ])("%s", (_, rows, turn, expected) => {
    expect(pickServer({ servers: servers(rows), key: undefined, turn })).toBe(expected);
  });

  test("an idle mesh's keyless requests go round every server", () => {
    const idle = servers(IDS.map((id): [string, number] => [id, 0]));
    const picked = new Set([0, 1, 2].map((turn) => pickServer({ servers: idle, key: undefined, turn })));
    expect(picked.size).toBe(3);
  });
});

describe("rendezvous ranking", () => {
  test("every node ranks alike, whatever order it lists the servers in", () => {
    const a = rankFor(KEY, IDS.map((nodeId) => ({ nodeId })));
    const b = rankFor(KEY, [...IDS].reverse().map((nodeId) => ({ nodeId })));
    expect(a).toEqual(b);
  });

  test("a server that leaves moves only its own keys; one that joins takes only keys from others, about its share", () => {
    const keys = Array.from({ length: 600 }, (_, i) => `u:user-${i}`);
    const top = (ids: string[], key: string) => rankFor(key, ids.map((nodeId) => ({ nodeId })))[0]!.nodeId;
    const before = keys.map((k) => top(IDS, k));
    const without = keys.map((k) => top(IDS.filter((id) => id !== "node-b"), k));
    keys.forEach((_, i) => before[i] !== "node-b" && expect(without[i]).toBe(before[i]!));
    const withD = keys.map((k) => top([...IDS, "node-d"], k));
    const moved = keys.filter((_, i) => withD[i] !== before[i]);
    keys.forEach((_, i) => withD[i] !== before[i] && expect(withD[i]).toBe("node-d"));
    // A quarter of the keys in expectation; a wide band, as any hash gives.
    expect(moved.length).toBeGreaterThan(100);
    expect(moved.length).toBeLessThan(200);
    // And the three share the keys about evenly.
    for (const id of IDS) expect(before.filter((t) => t === id).length).toBeGreaterThan(140);
  });

  test("load: the larger of our count and the announced running + waiting", () => {
    expect(loadOf({ nodeId: "x", outstanding: 2 })).toBe(2);
    expect(loadOf({ nodeId: "x", outstanding: 2, announced: slots(4, 3, 2) })).toBe(5);
    expect(loadOf({ nodeId: "x", outstanding: 7, announced: slots(4, 3, 2) })).toBe(7);
  });
});

test.each<[string, unknown, AnnouncedLoad | undefined]>([
  ["its demand for the model", { demand: [{ model: "x", slots: 1, inFlight: 0, queued: 0 }, { model: "m", slots: 4, inFlight: 2, queued: 1, waitMs: 30 }] }, slots(4, 2, 1)],
  ["another model's only: none", { demand: [{ model: "x", slots: 1, inFlight: 0, queued: 0 }] }, undefined],
  ["no demand (an older node): none", { serving: ["m"] }, undefined],
  ["counts that are no counts: none", { demand: [{ model: "m", slots: -1, inFlight: "2", queued: 0 }] }, undefined],
  ["junk entries are skipped", { demand: [null, 3, { model: "m", slots: 2, inFlight: 1, queued: 0 }] }, slots(2, 1, 0)],
  ["no announcement: none", undefined, undefined],
])("announcedLoad: %s", (_, announcement, expected) => {
  expect(announcedLoad(announcement, "m")).toEqual(expected);
});

describe("this node's own server", () => {
  test.each<[string, [string, number, AnnouncedLoad?][], string | undefined, string]>([
    ["a free slot: its own clients' requests stay here, whatever the key prefers", [[first, 0], [second, 0, slots(2, 1)], [third, 0]], KEY, second],
    ["a free slot, no key: here", [[first, 0], [second, 0, slots(1, 0)], [third, 0]], undefined, second],
    ["its slots full: the overflow goes by the usual rule", [[first, 0], [second, 0, slots(2, 2)], [third, 0]], KEY, first],
    ["its slots unknown: the usual rule", [[first, 0], [second, 0]], KEY, first],
  ])("%s", (_, rows, key, expected) => {
    expect(pickServer({ servers: servers(rows), key, own: second, turn: 0 })).toBe(expected);
  });

  test("avoided (it just failed this request): another", () => {
    expect(pickServer({ servers: servers([[first, 0], [second, 0, slots(4, 0)]]), key: KEY, own: second, avoid: new Set([second]) })).toBe(first);
  });
});
