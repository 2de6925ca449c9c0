/** When a host (re)loads: the settle window over a changing layout, and the backoff after failed loads. */
import { describe, expect, test } from "bun:test";
import { HostSchedule, SETTLE_MAX_MS, SETTLE_QUIET_MS } from "../../node/host-schedule.ts";

function clocked() {
  let now = 1_000_000;
  const schedule = new HostSchedule(() => now);
  return { schedule, advance: (ms: number) => void (now += ms) };
}
const boom = new Error("llama-server exited while loading\nstack...");

describe("the settle window", () => {
  test("a first load alone starts at once; one over peers waits for the group to be quiet", () => {
    const { schedule } = clocked();
    expect(schedule.delay("", false, false)).toBe(0);
    schedule.cancel();
    expect(schedule.delay("a,b", true, false)).toBe(SETTLE_QUIET_MS);
  });
  test("the same layout while a wait is pending: the wait goes on; a new layout starts the quiet time again, within the cap", () => {
    const { schedule, advance } = clocked();
    expect(schedule.delay("a", true, false)).toBe(SETTLE_QUIET_MS);
    advance(1_000);
    expect(schedule.delay("a", true, true)).toBeUndefined();
    expect(schedule.delay("a,b", true, true)).toBe(SETTLE_QUIET_MS);
    advance(SETTLE_MAX_MS - 1_500);
    expect(schedule.delay("a,b,c", true, true)).toBe(500);
    advance(1_000);
    expect(schedule.delay("a,b,c,d", true, true)).toBe(0);
  });
});

describe("after a failed load", () => {
  test.each<[string, string | undefined, string | undefined, number]>([
    ["the same layout: the backoff holds", "a,b", "a,b", 10_000],
    ["a member joined (the same file would fail again): the backoff holds", "a,b", "a,b,c", 10_000],
    ["a worker it failed over is gone (died mid-load): the load over the rest goes at the settle time", "a,b", "a", SETTLE_QUIET_MS],
    ["alone, then alone again: the backoff holds", "", "", 10_000],
  ])("%s", (_, failedOver, wanted, delay) => {
    const { schedule } = clocked();
    schedule.delay(failedOver, true, false);
    schedule.cancel();
    expect(schedule.failed("m", failedOver, boom)).toBe(10_000);
    schedule.layoutIs("m", wanted);
    expect(schedule.delay(wanted, true, false)).toBe(delay);
  });
  test("failures over one layout double the wait; what peers are told, while it is not served", () => {
    const { schedule, advance } = clocked();
    expect(schedule.failed("m", "a", boom)).toBe(10_000);
    advance(10_000);
    expect(schedule.failed("m", "a", boom)).toBe(20_000);
    expect(schedule.announced("m", [])).toEqual({ model: "m", error: "llama-server exited while loading", retryInS: 20 });
    expect(schedule.announced("m", ["m"])).toBeUndefined();
    expect(schedule.announced("other", [])).toBeUndefined();
    schedule.loaded("m");
    expect(schedule.announced("m", [])).toBeUndefined();
  });
});

test("the failure every member hears of names the file, not where this node keeps it", () => {
  const { schedule } = clocked();
  schedule.failed("m", "a", new Error('model "m": file /home/alice/models/m.gguf does not exist\nmore'));
  expect(schedule.announced("m", [])?.error).toBe('model "m": file m.gguf does not exist');
});
