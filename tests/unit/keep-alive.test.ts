/** An Ollama keep_alive across the mesh: the header's value both ways (nothing but whole ms passes), and what it does where the model is answered. */
import { describe, expect, test } from "bun:test";
import { keepAliveEffect, keepAliveHeaderValue, MAX_CARRIED_KEEP_ALIVE_MS, MEMBER_UNLOAD_EVERY_MS, MemberUnloads, memberKeepAlive, parseKeepAliveHeader } from "../../router/serving/keep-alive.ts";

describe("keepAliveHeaderValue: what the forwarding node sends", () => {
  test.each<[number | undefined, string | undefined]>([
    [undefined, undefined],
    [Number.NaN, undefined],
    [Number.POSITIVE_INFINITY, undefined],
    [0, "0"],
    [-0, "0"],
    [300_000, "300000"],
    [-1000, "-1000"],
    [1.6, "2"],
    [1e15, String(MAX_CARRIED_KEEP_ALIVE_MS)],
    [-1e15, String(-MAX_CARRIED_KEEP_ALIVE_MS)],
  ])("%p ms → %p", (ms, value) => expect(keepAliveHeaderValue(ms)).toBe(value));
});

describe("parseKeepAliveHeader: what the answering node accepts from a member", () => {
  test.each<[string | null | undefined, number | undefined]>([
    [undefined, undefined],
    [null, undefined],
    ["0", 0],
    ["-0", 0],
    ["300000", 300_000],
    ["-1000", -1000],
    ["1000000000000", 1e12],
    // Everything else is ignored: not a duration, a unit, a second value, space, another notation, too long.
    ["1000000000001", undefined],
    ["99999999999999", undefined],
    ["", undefined],
    ["-", undefined],
    ["5m", undefined],
    ["0s", undefined],
    [" 0", undefined],
    ["0 ", undefined],
    ["0,0", undefined],
    ["1e3", undefined],
    ["0x10", undefined],
    ["1.5", undefined],
    ["+5", undefined],
    ["Infinity", undefined],
    ["0\n", undefined],
  ])("%p → %p", (value, ms) => expect(parseKeepAliveHeader(value)).toBe(ms));

  test.each([0, 1, -1, 999, 86_400_000, -86_400_000])("a value sent for %p ms reads back as it", (ms) => {
    expect(parseKeepAliveHeader(keepAliveHeaderValue(ms))).toBe(ms);
  });
});

describe("keepAliveEffect: what a keep_alive does to the answering node's server", () => {
  const loaded = { pinned: false };
  const pinned = { pinned: true };
  test.each<[string, { pinned: boolean } | undefined, number | undefined, ReturnType<typeof keepAliveEffect>]>([
    ["not loaded here", undefined, 0, { action: "none" }],
    ["pinned: the operator's pin outranks it", pinned, 0, { action: "none" }],
    ["pinned, a duration", pinned, 60_000, { action: "none" }],
    ["0 unloads", loaded, 0, { action: "unload" }],
    ["a duration becomes its idle unload", loaded, 60_000, { action: "idle", ms: 60_000 }],
    ["a short one, at least a second", loaded, 10, { action: "idle", ms: 1000 }],
    ["negative keeps it loaded", loaded, -1000, { action: "idle", ms: -1000 }],
    ["none: the node's idle unload again", loaded, undefined, { action: "idle", ms: undefined }],
  ])("%s", (_, server, ms, effect) => expect(keepAliveEffect(server, ms)).toEqual(effect));
});

describe("memberKeepAlive: what of a member's keep_alive the answering node applies", () => {
  test.each<[string, number, number | undefined, number, number | undefined]>([
    ["a duration", 60_000, undefined, 0, 60_000],
    ["0, no unload by members before", 0, undefined, 1_000, 0],
    ["0, members unloaded it a moment ago: nothing", 0, 1_000, 2_000, undefined],
    ["0, members unloaded it long enough ago", 0, 1_000, 1_000 + MEMBER_UNLOAD_EVERY_MS, 0],
    ["a duration right after an unload: still a duration", 5_000, 1_000, 2_000, 5_000],
    ["negative: a member pins nothing here", -1, undefined, 0, undefined],
  ])("%s", (_, ms, last, now, applied) => expect(memberKeepAlive(ms, last, now)).toBe(applied));

  test("MemberUnloads remembers an unload per model, and only what was done", () => {
    const unloads = new MemberUnloads();
    expect(unloads.allows("a", 0, 0)).toBe(0);
    // Allowed is not done: a pinned model that ignored it leaves the next 0 free.
    expect(unloads.allows("a", 0, 10)).toBe(0);
    unloads.unloaded("a", 10);
    expect(unloads.allows("a", 0, 20)).toBeUndefined();
    expect(unloads.allows("b", 0, 20)).toBe(0);
  });
});
