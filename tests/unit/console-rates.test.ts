import { describe, expect, test } from "bun:test";
import type { TrafficSample } from "../../console/protocol.ts";
import { latest, merge, pickForwarded, pickRequests, pickTokensOut, pickTunnelIn, rates, ttftMeans } from "../../console/src/rates.ts";

type ModelCounters = TrafficSample["models"][string];
const m = (requests: number, over: Partial<ModelCounters> = {}): ModelCounters => ({ requests, tokensIn: 0, tokensOut: 0, ttftSumS: 0, ttftCount: 0, ...over });
const s = (atS: number, models: TrafficSample["models"] = {}, peers: TrafficSample["peers"] = {}): TrafficSample => ({ at: atS * 1000, models, peers });

describe("rates from cumulative counters", () => {
  test.each<[string, TrafficSample[], number[], Record<string, (number | null)[]>]>([
    ["no samples: nothing", [], [], {}],
    ["one sample: no interval yet", [s(0, { a: m(5) })], [], { a: [] }],
    ["difference over the seconds between", [s(0, { a: m(0) }), s(2, { a: m(4) }), s(4, { a: m(10) })], [2, 4], { a: [2, 3] }],
    ["uneven intervals", [s(0, { a: m(0) }), s(1, { a: m(3) }), s(5, { a: m(7) })], [1, 5], { a: [3, 1] }],
    ["a counter first seen counts from zero", [s(0, {}), s(2, { a: m(4) })], [2], { a: [2] }],
    ["a counter that went down (restart) is a gap", [s(0, { a: m(10) }), s(2, { a: m(2) }), s(4, { a: m(6) })], [2, 4], { a: [null, 2] }],
    ["a counter that vanished is a gap", [s(0, { a: m(2) }), s(2, {}), s(4, { a: m(6) })], [2, 4], { a: [null, 3] }],
    ["samples with the same time are skipped", [s(0, { a: m(0) }), s(0, { a: m(5) }), s(2, { a: m(9) })], [2], { a: [2] }],
    ["several series, sorted by key", [s(0, { b: m(0), a: m(0) }), s(2, { b: m(2), a: m(8) })], [2], { a: [4], b: [1] }],
  ])("%s", (_name, samples, x, series) => {
    const r = rates(samples, pickRequests);
    expect(r.x).toEqual(x);
    expect(Object.fromEntries(r.series.map((q) => [q.key, q.values]))).toEqual(series);
  });

  test("each counter of models and peers", () => {
    const samples = [
      s(0, { a: m(0, { tokensOut: 100 }) }, { p: { forwarded: 1, tunnelIn: 1000, tunnelOut: 0 } }),
      s(2, { a: m(0, { tokensOut: 300 }) }, { p: { forwarded: 5, tunnelIn: 5000, tunnelOut: 0 } }),
    ];
    expect(rates(samples, pickTokensOut).series).toEqual([{ key: "a", values: [100] }]);
    expect(rates(samples, pickForwarded).series).toEqual([{ key: "p", values: [2] }]);
    expect(rates(samples, pickTunnelIn).series).toEqual([{ key: "p", values: [2000] }]);
  });
});

describe("time to first token", () => {
  test.each<[string, TrafficSample[], (number | null)[]]>([
    ["mean of the interval's answers", [s(0, { a: m(0, { ttftSumS: 1, ttftCount: 2 }) }), s(2, { a: m(0, { ttftSumS: 1.6, ttftCount: 5 }) })], [0.2]],
    ["no answers in the interval: a gap", [s(0, { a: m(0, { ttftSumS: 1, ttftCount: 2 }) }), s(2, { a: m(0, { ttftSumS: 1, ttftCount: 2 }) })], [null]],
    ["first seen: counts from zero", [s(0), s(2, { a: m(0, { ttftSumS: 0.9, ttftCount: 3 }) })], [0.3]],
    ["counters went down: a gap", [s(0, { a: m(0, { ttftSumS: 5, ttftCount: 9 }) }), s(2, { a: m(0, { ttftSumS: 0.1, ttftCount: 1 }) })], [null]],
  ])("%s", (_name, samples, values) => {
    const r = ttftMeans(samples);
    expect(r.series[0]?.values.map((v) => (v === null ? null : Number(v.toFixed(6))))).toEqual(values);
  });
});

describe("latest and merge", () => {
  test.each<[(number | null)[], number | null]>([
    [[], null],
    [[null, null], null],
    [[1, 2, null], 2],
    [[0], 0],
  ])("latest(%j) = %p", (values, expected) => {
    expect(latest(values)).toBe(expected);
  });

  test("merge prefixes keys and keeps one x", () => {
    const a = { x: [1, 2], series: [{ key: "m", values: [1, 2] }] };
    const b = { x: [1, 2], series: [{ key: "p", values: [3, 4] }] };
    expect(merge([{ prefix: "", rates: a }, { prefix: "peer:", rates: b }])).toEqual({
      x: [1, 2],
      series: [
        { key: "m", values: [1, 2] },
        { key: "peer:p", values: [3, 4] },
      ],
    });
    expect(merge([])).toEqual({ x: [], series: [] });
  });
});
