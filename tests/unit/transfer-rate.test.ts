/**
 * How fast a transfer moves (`RateMeter`, `MeasuredRates`), on a clock the test turns: the window
 * opens after the warm-up, is full only with both its time and its bytes, counts no byte that did
 * not move (a resumed file's first report); a source that moves little is judged at `maxMs`; a
 * rate is forgotten after its time, and the oldest source first when there are too many.
 */
import { describe, expect, test } from "bun:test";
import { MeasuredRates, RateMeter, type RateWindow } from "../../models/transfer-rate.ts";
import { withDeadline } from "../../harness/wait.ts";

const W: RateWindow = { warmupMs: 500, minMs: 2_000, minBytes: 8_000, maxMs: 60_000 };

function meter(w: RateWindow = W) {
  let t = 0;
  const m = new RateMeter(w, () => t);
  return { m, at: (ms: number) => void (t = ms), state: () => Bun.peek.status(m.full) };
}

describe("RateMeter", () => {
  test("the window opens after the warm-up and is full with both its time and its bytes", async () => {
    const { m, at, state } = meter();
    at(0);
    m.add(100_000); // the ramp: not counted
    at(500);
    m.add(1_000); // opens the window
    at(1_000);
    m.add(9_000); // enough bytes, not enough time
    expect(state()).toBe("pending");
    at(2_500);
    m.add(1_000); // 10,000 bytes over 2 s
    expect(await m.full).toBe(5_000);
    m.stop();
  });

  test("enough time but too few bytes: not full", () => {
    const { m, at, state } = meter();
    at(0);
    m.add(1);
    at(500);
    m.add(1);
    at(10_000);
    m.add(100);
    expect(state()).toBe("pending");
    m.stop();
  });

  test("progress: the first report is where the transfer starts, and a restart from zero moved nothing", async () => {
    const { m, at } = meter({ ...W, warmupMs: 0 });
    at(0);
    m.progressTo(5_000_000); // resumed: already here
    at(1_000);
    m.progressTo(5_004_000);
    at(1_500);
    m.progressTo(2_000); // started over
    at(2_000);
    m.progressTo(10_000);
    expect(await m.full).toBe(6_000); // 4,000 + 8,000 bytes over 2 s
    m.stop();
  });

  test("a source that moves too little is judged at maxMs on what it moved; one that moved nothing at 0", async () => {
    const slow = meter({ ...W, maxMs: 20 });
    slow.at(0);
    slow.m.add(10);
    slow.at(1_000);
    slow.m.add(990);
    // The clock the meter reads says 2 s passed when its timer fires.
    slow.at(2_000);
    expect(await withDeadline(slow.m.full, 5_000, "the slow source's judgement")).toBe(500);
    const silent = meter({ ...W, maxMs: 20 });
    silent.m.begin();
    expect(await withDeadline(silent.m.full, 5_000, "the silent source's judgement")).toBe(0);
  });

  test("final: over the window, over all of a transfer shorter than the warm-up, undefined for too few bytes", () => {
    const long = meter();
    long.at(0);
    long.m.add(50_000);
    long.at(500);
    long.m.add(1);
    long.at(1_500);
    long.m.add(10_000);
    expect(long.m.final()).toBe(10_000);
    long.m.stop();

    const quick = meter();
    quick.at(0);
    quick.m.add(4_000);
    quick.at(200);
    quick.m.add(6_000);
    expect(quick.m.final()).toBe(50_000);
    quick.m.stop();

    const tiny = meter();
    tiny.at(0);
    tiny.m.add(10);
    tiny.at(100);
    expect(tiny.m.final()).toBeUndefined();
    tiny.m.stop();
  });

  test("restart: the bytes before it do not count, and the warm-up begins again", async () => {
    const { m, at, state } = meter();
    at(0);
    m.add(1);
    at(500);
    m.add(1);
    at(2_400);
    m.restart(); // another path
    at(2_500);
    m.add(1_000_000); // its ramp
    expect(state()).toBe("pending");
    at(3_000);
    m.add(1);
    at(5_000);
    m.add(8_000);
    expect(await m.full).toBe(4_000);
    m.stop();
  });
});

describe("MeasuredRates", () => {
  test("a rate is kept for its time, then forgotten", () => {
    let now = 0;
    const rates = new MeasuredRates(1_000, () => now);
    rates.set("peer", 14e6);
    now = 1_000;
    expect(rates.get("peer")).toBe(14e6);
    now = 1_001;
    expect(rates.get("peer")).toBeUndefined();
  });

  test("too many sources: the oldest goes", () => {
    const rates = new MeasuredRates();
    for (let i = 0; i <= 256; i++) rates.set(`host-${i}`, i);
    expect(rates.get("host-0")).toBeUndefined();
    expect(rates.get("host-1")).toBe(1);
    expect(rates.get("host-256")).toBe(256);
  });
});
