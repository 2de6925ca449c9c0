/**
 * Issue 46: who watches whom (`mesh/watch-ring.ts`), as tables. A member beats its ring neighbours
 * (three each way by id, wrapping), those that named it their neighbour lately, and members another
 * said fell silent; the rest it judges by QUIC's keep-alives, at a longer limit and with no
 * control messages expected. Small meshes are all neighbours, as before the ring.
 */
import { describe, expect, test } from "bun:test";
import { fakeAnnouncement } from "../../harness/rogue-peer.ts";
import { PeerTable, type Peer } from "../../mesh/peer-table.ts";
import type { PeerConnection } from "../../mesh/transport.ts";
import { LOST_NOTICES_PER_HEARTBEAT, PROBE_MS, QUIC_KEEPALIVE_MS, UNWATCHED_COUNT_MS, ringNeighbours, RING_SIDE, silenceLimits, silenceVerdict, UNWATCHED_SILENCE_MS, WATCH_BACK_HEARTBEATS, watches, type WatchFacts } from "../../mesh/watch-ring.ts";

const ids = (n: number) => Array.from({ length: n }, (_, i) => `n${String(i).padStart(2, "0")}`);
const sorted = (s: Set<string>) => [...s].sort();

describe("ringNeighbours: three each way by id, wrapping; everyone in a mesh of up to seven", () => {
  const cases: [string, string, string[], number, string[]][] = [
    ["alone", "n00", [], RING_SIDE, []],
    ["one peer", "n00", ["n01"], RING_SIDE, ["n01"]],
    ["seven members: all six others", "n03", ids(7), RING_SIDE, ["n00", "n01", "n02", "n04", "n05", "n06"]],
    ["eight members: all but the one across the ring", "n00", ids(8), RING_SIDE, ["n01", "n02", "n03", "n05", "n06", "n07"]],
    ["in the middle of twenty", "n10", ids(20), RING_SIDE, ["n07", "n08", "n09", "n11", "n12", "n13"]],
    ["at the start of twenty: wraps to the end", "n00", ids(20), RING_SIDE, ["n01", "n02", "n03", "n17", "n18", "n19"]],
    ["at the end of twenty: wraps to the start", "n19", ids(20), RING_SIDE, ["n00", "n01", "n02", "n16", "n17", "n18"]],
    ["a side of one", "n05", ids(10), 1, ["n04", "n06"]],
    ["self and duplicates in the list change nothing", "n05", [...ids(10), "n05", "n06", "n06"], 1, ["n04", "n06"]],
    ["self not in the list: placed by its id", "m", ["a", "b", "c", "x", "y", "z"], 1, ["c", "x"]],
  ];
  test.each(cases)("%s", (_what, self, list, side, expected) => {
    expect(sorted(ringNeighbours(self, list, side))).toEqual(expected);
  });

  test("the relation is symmetric: a neighbour's neighbours include us, at 50 members", () => {
    const all = ids(50);
    for (const a of all) for (const b of ringNeighbours(a, all)) expect(ringNeighbours(b, all).has(a)).toBe(true);
  });

  test("every member of 50 is watched by six others", () => {
    const all = ids(50);
    const watchers = new Map(all.map((id) => [id, 0]));
    for (const a of all) for (const b of ringNeighbours(a, all)) watchers.set(b, watchers.get(b)! + 1);
    expect(new Set(watchers.values())).toEqual(new Set([2 * RING_SIDE]));
  });
});

describe("watches: whom this node beats and drops at the short limits (2 s heartbeat)", () => {
  const hb = 2_000;
  const now = 100_000;
  const far: WatchFacts = { ringAware: true, neighbour: false };
  const cases: [string, WatchFacts, boolean][] = [
    ["a member not in the ring (an older node, or no datagram counts): always", { ringAware: false, neighbour: false }, true],
    ["a ring neighbour", { ...far, neighbour: true }, true],
    ["a member away on the ring, nothing else", far, false],
    ["one that named us its neighbour just now", { ...far, watchedByAt: now - 1 }, true],
    ["one that named us its neighbour within the watch-back window", { ...far, watchedByAt: now - WATCH_BACK_HEARTBEATS * hb + 1 }, true],
    ["one whose last such beat is older than the window", { ...far, watchedByAt: now - WATCH_BACK_HEARTBEATS * hb }, false],
    ["one a member said fell silent", { ...far, suspectSince: now - 50_000 }, true],
  ];
  test.each(cases)("%s → %p", (_what, facts, expected) => {
    expect(watches(facts, now, hb)).toBe(expected);
  });
});

describe("silence limits and verdicts, at the node's 6 s peer timeout", () => {
  test("a watched peer: 6 s without a datagram, 30 s without a control message; one not watched: two keep-alives and room, no control limit", () => {
    expect(silenceLimits(true, 6_000, 5)).toEqual({ datagramMs: 6_000, controlMs: 30_000 });
    expect(silenceLimits(false, 6_000, 5)).toEqual({ datagramMs: UNWATCHED_SILENCE_MS, controlMs: undefined });
    expect(UNWATCHED_SILENCE_MS).toBeGreaterThan(2 * QUIC_KEEPALIVE_MS);
    // A longer peer timeout than that (a test's, or an operator's) still holds for both.
    expect(silenceLimits(false, 20_000, 5).datagramMs).toBe(20_000);
    expect(PROBE_MS).toBeLessThan(QUIC_KEEPALIVE_MS);
  });

  const now = 1_000_000;
  const watched = silenceLimits(true, 6_000, 5);
  const unwatched = silenceLimits(false, 6_000, 5);
  const cases: [string, { lastSeen: number; heardAt: number; watchedSince: number }, typeof watched, string | undefined][] = [
    ["watched, heard from lately", { lastSeen: now - 1_000, heardAt: now - 5_000, watchedSince: 0 }, watched, undefined],
    ["watched, no datagram for 6.1 s", { lastSeen: now - 6_100, heardAt: now - 6_100, watchedSince: 0 }, watched, "silent for over 6000 ms"],
    ["watched, datagrams but no control message for 31 s (a stuck event loop)", { lastSeen: now, heardAt: now - 31_000, watchedSince: 0 }, watched, "no control message for over 30000 ms"],
    ["watched only since 10 s ago, its last control message 40 s ago: the limit counts from when we began", { lastSeen: now, heardAt: now - 40_000, watchedSince: now - 10_000 }, watched, undefined],
    ["not watched: 10 s between keep-alives is fine", { lastSeen: now - 10_000, heardAt: now - 300_000, watchedSince: 0 }, unwatched, undefined],
    ["not watched: no datagram past the limit", { lastSeen: now - UNWATCHED_SILENCE_MS - 1, heardAt: now, watchedSince: 0 }, unwatched, `silent for over ${UNWATCHED_SILENCE_MS} ms`],
  ];
  test.each(cases)("%s", (_what, heard, limits, expected) => {
    expect(silenceVerdict(heard, limits, now)).toBe(expected);
  });
});

describe("PeerTable: a member's word that another fell silent, checked by a probe", () => {
  const hb = 2_000;
  /** A peer in the ring whose connection counts `received` datagrams from it (the test moves them). */
  function peer(id: string, counts: { received: number }): Peer {
    const conn = { datagrams: () => ({ sent: 0, received: counts.received }) } as unknown as PeerConnection;
    return { id, conn, control: undefined as never, dialer: id, announcement: { ...fakeAnnouncement(id), beats: true, ring: true }, lastSeen: 0, heardAt: 0, standing: { standing: "member" }, watched: false, watchedSince: 0 };
  }
  function table(n: number) {
    const counts = Array.from({ length: n }, () => ({ received: 0 }));
    const t = new PeerTable();
    counts.forEach((c, i) => t.set(`p${i}`, peer(`p${i}`, c)));
    t.readLines("self", 0, hb);
    return { t, counts, p: (i: number) => t.get(`p${i}`)! };
  }

  test("the member named is probed once while it is checked, never the sender itself nor a member unknown", () => {
    const { t, p } = table(10);
    expect(t.suspectOnWord(p(0), "p5", 1_000, hb)?.id).toBe("p5");
    expect(p(5).watched).toBe(true);
    expect(t.suspectOnWord(p(1), "p5", 1_001, hb)).toBeUndefined();
    expect(t.suspectOnWord(p(0), "p0", 1_002, hb)).toBeUndefined();
    expect(t.suspectOnWord(p(0), "nobody", 1_003, hb)).toBeUndefined();
  });

  test(`a member's notices act on ${LOST_NOTICES_PER_HEARTBEAT} members a heartbeat at most`, () => {
    const { t, p } = table(20);
    const acted = (from: number, at: number) => Array.from({ length: 19 }, (_, i) => `p${i + 1}`).filter((id) => t.suspectOnWord(p(from), id, at, hb) !== undefined);
    expect(acted(0, 1_000)).toHaveLength(LOST_NOTICES_PER_HEARTBEAT);
    // Another member's budget is its own; a heartbeat later the first may name more.
    expect(acted(19, 1_100).length).toBeGreaterThan(0);
    expect(acted(0, 1_000 + hb).length).toBeGreaterThan(0);
  });

  test("a suspect that sends no datagram within the probe window is unanswered; one that sends one is not", () => {
    const { t, counts, p } = table(10);
    for (const id of ["p1", "p2"]) t.suspectOnWord(p(0), id, 1_000, hb);
    expect(t.readLines("self", 1_000 + PROBE_MS - 1, hb).unanswered).toEqual([]);
    counts[2]!.received++;
    expect(t.readLines("self", 1_000 + PROBE_MS, hb).unanswered.map((x) => x.id)).toEqual(["p1"]);
  });

  test("silence is judged on fresh counts: after our own event loop stalled, a peer QUIC heard from meanwhile stays", () => {
    const { t, counts, p } = table(3);
    const stalledUntil = 1_000 + 20_000;
    counts[1]!.received++;
    const silent = t.silent(stalledUntil, 6_000).map((x) => x.peer.id);
    expect(silent).toEqual(["p0", "p2"]);
    expect(p(1).lastSeen).toBe(stalledUntil);
  });

  test(`counts are read every look for the peers watched, every ${UNWATCHED_COUNT_MS} ms for the rest`, () => {
    const reads = new Map<string, number>();
    const t = new PeerTable();
    for (let i = 0; i < 10; i++) {
      const id = `p${i}`;
      const conn = { datagrams: () => (reads.set(id, (reads.get(id) ?? 0) + 1), { sent: 0, received: 0 }) } as unknown as PeerConnection;
      t.set(id, { ...peer(id, { received: 0 }), conn });
    }
    // "self" sorts after p9: its neighbours are p7, p8, p9 and, wrapping, p0, p1, p2.
    for (let now = 0; now <= 5_000; now += 500) t.readLines("self", now, hb);
    const watched = [...t.values()].filter((x) => x.watched).map((x) => x.id);
    expect(watched).toEqual(["p0", "p1", "p2", "p7", "p8", "p9"]);
    for (const id of watched) expect(reads.get(id)).toBe(11);
    for (const id of ["p3", "p4", "p5", "p6"]) expect(reads.get(id)).toBe(3);
  });
});
