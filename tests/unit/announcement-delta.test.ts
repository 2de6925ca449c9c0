/**
 * Issue 46: what an idle member sends grows with its peers, not with what it holds. Announcements
 * by difference (`mesh/announcement-delta.ts`), when a beat is due (`beatDue`), the paced dials
 * (`mesh/dial-queue.ts`), and frames read a buffer at a time (`FrameReader`).
 */
import { describe, expect, test } from "bun:test";
import { fakeAnnouncement } from "../../harness/rogue-peer.ts";
import { announcementPatch, nextMessage, patched } from "../../mesh/announcement-delta.ts";
import { createLog } from "../../base/log.ts";
import { DialQueue, dialsToStart, passingDelayMs } from "../../mesh/dial-queue.ts";
import { beatDue, CONTROL_EVERY_HEARTBEATS } from "../../mesh/membership-rules.ts";
import { ControlMessageSchema, type Announcement } from "../../mesh/messages.ts";
import type { RecvSide } from "../../streams/stream.ts";
import { encodeFrame, FrameReader, MAX_CONTROL_MESSAGE, WireError } from "../../streams/wire.ts";

const base = (): Announcement => ({ ...fakeAnnouncement("a".repeat(64)), beats: true, seq: 4, serving: ["m"], assigned: "m", hosting: true });

describe("a patch carries what moved, and applied gives the announcement whole", () => {
  const cases: [string, (a: Announcement) => Announcement, string[], string[]][] = [
    ["nothing moved", (a) => ({ ...a, seq: 5 }), [], []],
    ["a list", (a) => ({ ...a, seq: 5, serving: [] }), ["serving"], []],
    ["two fields", (a) => ({ ...a, seq: 5, role: "host", vramBytes: 7 }), ["role", "vramBytes"], []],
    ["an optional field gone", (a) => ({ ...a, seq: 5, assigned: undefined }), [], ["assigned"]],
    ["an optional field new", (a) => ({ ...a, seq: 5, fetching: { model: "x", bytes: 1, total: 2, from: "hub" } }), ["fetching"], []],
    ["the queues' figures", (a) => ({ ...a, seq: 5, demand: [{ model: "m", slots: 1, inFlight: 1, queued: 0, waitMs: 0 }] }), ["demand"], []],
  ];
  test.each(cases)("%s", (_what, change, set, unset) => {
    const prev = base();
    const cur = change(prev);
    const patch = announcementPatch(prev, cur);
    expect(Object.keys(patch.set).sort()).toEqual(set.sort());
    expect(patch.unset).toEqual(unset);
    // On the wire and back, as a peer reads it.
    const wire = ControlMessageSchema.parse(JSON.parse(JSON.stringify({ v: 1, type: "patch", ...patch })));
    if (wire.type !== "patch") throw new Error("not a patch");
    expect(patched(prev, wire)).toEqual(JSON.parse(JSON.stringify(cur)));
  });

  test("out of step: another base, or no newer seq; the whole one is asked for", () => {
    const held = base();
    expect(patched(held, { base: 3, seq: 5, set: {}, unset: [] })).toBe("out of step");
    expect(patched(held, { base: 4, seq: 4, set: {}, unset: [] })).toBe("out of step");
  });

  test.each([
    ["a field of the wrong shape", { vramBytes: "lots" }, []],
    ["a list over its limit", { serving: Array.from({ length: 300 }, (_, i) => `m${i}`) }, []],
    ["a required field taken away", {}, ["role"]],
  ] as [string, Record<string, unknown>, string[]][])("junk: %s", (_what, set, unset) => {
    expect(() => patched(base(), { base: 4, seq: 5, set, unset })).toThrow(WireError);
  });

  test.each([
    ["who the node is", { type: "patch", base: 1, seq: 2, set: { nodeId: "b".repeat(64) }, unset: [] }],
    ["which start it is", { type: "patch", base: 1, seq: 2, set: { instance: "x" }, unset: [] }],
    ["a field no node knows", { type: "patch", base: 1, seq: 2, set: { password: "x" }, unset: [] }],
    ["a field taken away that no node knows", { type: "patch", base: 1, seq: 2, set: {}, unset: ["password"] }],
    ["a beat without a seq", { type: "beat" }],
    ["a beat's negative seq", { type: "beat", seq: -1 }],
  ])("refused on arrival: %s", (_what, msg) => {
    expect(ControlMessageSchema.safeParse({ v: 1, ...msg }).success).toBe(false);
  });

  test("a beat's junk figures are dropped on their own, the beat kept", () => {
    const parsed = ControlMessageSchema.parse({ v: 1, type: "beat", seq: 3, demand: "lots" });
    expect(parsed).toEqual({ v: 1, type: "beat", seq: 3, demand: undefined });
  });
});

describe("what a peer is sent (nextMessage)", () => {
  const prev = base();
  const cur = { ...prev, seq: 5 };
  const cases: [string, { beats: boolean; ourSeq: number | undefined }, Announcement | undefined, boolean, ReturnType<typeof nextMessage>][] = [
    ["an older node, on the heartbeat: the whole announcement, as always", { beats: false, ourSeq: 5 }, prev, true, "announce"],
    ["an older node, on a change", { beats: false, ourSeq: 4 }, prev, false, "announce"],
    ["holds ours, on the heartbeat: a beat", { beats: true, ourSeq: 5 }, prev, true, "beat"],
    ["holds ours, no heartbeat: nothing", { beats: true, ourSeq: 5 }, prev, false, "nothing"],
    ["holds the one before: a patch", { beats: true, ourSeq: 4 }, prev, false, "patch"],
    ["holds the one before, on the heartbeat: a patch", { beats: true, ourSeq: 4 }, prev, true, "patch"],
    ["holds an older one: the whole", { beats: true, ourSeq: 2 }, prev, false, "announce"],
    ["holds nothing we know of: the whole", { beats: true, ourSeq: undefined }, prev, true, "announce"],
    ["nothing sent before: the whole", { beats: true, ourSeq: 4 }, undefined, false, "announce"],
    ["the one before is of another start: the whole", { beats: true, ourSeq: 4 }, { ...prev, instance: "other" }, false, "announce"],
  ];
  test.each(cases)("%s", (_what, peer, p, heartbeat, kind) => {
    expect(nextMessage(peer, p, cur, heartbeat)).toBe(kind);
  });
});

describe("when a peer is due a beat (beatDue), with a 2 s heartbeat", () => {
  const hb = 2_000;
  const cases: [string, { beats: boolean; controlAt: number; lineAt: number | undefined }, number, boolean][] = [
    ["reads beats; nothing of ours for a heartbeat", { beats: true, controlAt: 0, lineAt: 1_000 }, 3_000, true],
    ["reads beats; a datagram of ours (QUIC's own) within the heartbeat", { beats: true, controlAt: 0, lineAt: 1_500 }, 3_000, false],
    ["reads beats; a control message within the heartbeat", { beats: true, controlAt: 2_000, lineAt: undefined }, 3_000, false],
    ["reads beats; datagrams flow but no control message for five heartbeats", { beats: true, controlAt: 0, lineAt: 9_900 }, CONTROL_EVERY_HEARTBEATS * hb, true],
    ["a transport that counts nothing: a heartbeat after the last message", { beats: true, controlAt: 1_000, lineAt: undefined }, 3_000, true],
    ["an older node: datagrams count for nothing", { beats: false, controlAt: 0, lineAt: 2_900 }, 3_000, true],
    ["an older node: a message within the heartbeat", { beats: false, controlAt: 1_500, lineAt: undefined }, 3_000, false],
  ];
  test.each(cases)("%s", (_what, sent, now, due) => {
    expect(beatDue(sent, now, hb)).toBe(due);
  });
});

describe("paced dials", () => {
  test("a member heard of in passing waits; of two that heard of each other the smaller id dials first", () => {
    expect(passingDelayMs("a", "b")).toBeLessThan(passingDelayMs("b", "a"));
  });
  test("a newcomer is news once: told to the peers by the first node to admit it, or to hear of it in passing", () => {
    const dialed: string[] = [];
    const q = new DialQueue({ selfId: "self", dial: async (a) => void dialed.push(a.nodeId), busy: () => true, dialing: () => 0, stopped: () => false, log: createLog("json", () => {}) });
    expect(q.admitted("x")).toBe(true);
    expect(q.admitted("x")).toBe(false);
    q.passing([{ nodeId: "y", addresses: [] }]);
    expect(q.admitted("y")).toBe(false);
    expect(q.admitted("z")).toBe(true);
    // Every member here is busy (a peer already): none is dialed.
    expect(dialed).toEqual([]);
    q.stop();
  });
  const waiting = new Map([["x", 0], ["y", 5], ["z", 1], ["late", 100]]);
  const cases: [string, number, (id: string) => boolean, string[]][] = [
    ["room for all due: the soonest first", 10, () => false, ["x", "z", "y"]],
    ["room for two", 2, () => false, ["x", "z"]],
    ["no room", 0, () => false, []],
    ["a peer by now, or dialed already: skipped", 10, (id) => id === "z", ["x", "y"]],
    ["more dials under way than the limit", -3, () => false, []],
  ];
  test.each(cases)("%s", (_what, room, busy, ids) => {
    expect(dialsToStart(waiting, 50, room, busy)).toEqual(ids);
  });
});

describe("FrameReader", () => {
  /** A stream that hands out its bytes in the pieces given, then ends. */
  function pieces(...parts: Uint8Array[]): RecvSide {
    const queue = parts.map((p) => p.slice());
    return {
      read: async (buf) => {
        const next = queue[0];
        if (!next) return null;
        const n = Math.min(buf.length, next.length);
        buf.set(next.subarray(0, n));
        if (n === next.length) queue.shift();
        else queue[0] = next.subarray(n);
        return n;
      },
      readExact: async () => {},
      stop: async () => {},
    };
  }
  const join = (...frames: Uint8Array[]) => Uint8Array.from(frames.flatMap((f) => [...f]));
  const a = encodeFrame({ n: 1 });
  const b = encodeFrame({ n: 2, text: "x".repeat(40_000) });

  test("frames whole, split anywhere, or several in one read; a frame larger than the buffer", async () => {
    const all = join(a, b, a);
    for (const cut of [1, 3, 4, 5, a.length, a.length + 2, a.length + 30_000]) {
      const reader = new FrameReader(pieces(all.subarray(0, cut), all.subarray(cut)), 64);
      const got = [await reader.next(), await reader.next(), await reader.next(), await reader.next()];
      expect(got.map((g) => (g?.message as { n: number } | undefined)?.n ?? null)).toEqual([1, 2, 1, null]);
      expect(got[1]?.bytes).toBe(b.length);
    }
  });

  test("a stream that ends inside a frame is the peer's fault; one over the cap is refused before it is read", async () => {
    await expect(new FrameReader(pieces(a.subarray(0, 2))).next()).rejects.toThrow("inside a control message's length");
    await expect(new FrameReader(pieces(a.subarray(0, a.length - 1))).next()).rejects.toThrow("inside a control message's body");
    const over = new Uint8Array(8);
    new DataView(over.buffer).setUint32(0, MAX_CONTROL_MESSAGE + 1);
    await expect(new FrameReader(pieces(over)).next()).rejects.toThrow("over the");
  });
});
