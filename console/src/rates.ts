/**
 * Rates from the node's cumulative counters (pure): each pair of consecutive traffic samples gives
 * one point per counter, (later − earlier) / seconds between them, at the later sample's time. A
 * counter seen for the first time counts from zero; one that went down (its node restarted) or
 * vanished gives a gap (null), never a negative rate. Time to first token is the mean over the
 * interval: Δ sum / Δ count, a gap when nothing was answered in it.
 */
import type { TrafficSample } from "../protocol.ts";

export interface RateSeries {
  key: string;
  values: (number | null)[];
}

export interface Rates {
  /** Seconds since the epoch, one per interval (uPlot's time axis). */
  x: number[];
  series: RateSeries[];
}

/** Flat counters of one sample, by series key. */
export type CounterPick = (s: TrafficSample) => Record<string, number>;

function keysInOrder(samples: readonly TrafficSample[], keysOf: (s: TrafficSample) => string[]): string[] {
  const keys = new Set<string>();
  for (const s of samples) for (const k of keysOf(s)) keys.add(k);
  return [...keys].sort();
}

/** Per-second rates of every counter `pick` finds in `samples`. */
export function rates(samples: readonly TrafficSample[], pick: CounterPick): Rates {
  const picked = samples.map(pick);
  const keys = keysInOrder(samples, (s) => Object.keys(pick(s)));
  const x: number[] = [];
  const series: RateSeries[] = keys.map((key) => ({ key, values: [] }));
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1]!;
    const b = samples[i]!;
    const dt = (b.at - a.at) / 1000;
    if (!(dt > 0)) continue;
    x.push(b.at / 1000);
    for (const s of series) {
      const after = picked[i]![s.key];
      const before = picked[i - 1]![s.key] ?? 0;
      const delta = after === undefined ? -1 : after - before;
      s.values.push(delta < 0 ? null : delta / dt);
    }
  }
  return { x, series };
}

/** Mean time to first token per model and interval, in seconds. */
export function ttftMeans(samples: readonly TrafficSample[]): Rates {
  const keys = keysInOrder(samples, (s) => Object.keys(s.models));
  const x: number[] = [];
  const series: RateSeries[] = keys.map((key) => ({ key, values: [] }));
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1]!;
    const b = samples[i]!;
    if (!(b.at > a.at)) continue;
    x.push(b.at / 1000);
    for (const s of series) {
      const after = b.models[s.key];
      const before = a.models[s.key] ?? { ttftSumS: 0, ttftCount: 0 };
      const count = after ? after.ttftCount - before.ttftCount : 0;
      const sum = after ? after.ttftSumS - before.ttftSumS : 0;
      s.values.push(count > 0 && sum >= 0 ? sum / count : null);
    }
  }
  return { x, series };
}

const fromModels =
  (field: "requests" | "tokensIn" | "tokensOut"): CounterPick =>
  (s) =>
    Object.fromEntries(Object.entries(s.models).map(([k, v]) => [k, v[field]]));

const fromPeers =
  (field: "forwarded" | "tunnelIn" | "tunnelOut"): CounterPick =>
  (s) =>
    Object.fromEntries(Object.entries(s.peers).map(([k, v]) => [k, v[field]]));

export const pickRequests = fromModels("requests");
export const pickTokensIn = fromModels("tokensIn");
export const pickTokensOut = fromModels("tokensOut");
export const pickForwarded = fromPeers("forwarded");
export const pickTunnelIn = fromPeers("tunnelIn");
export const pickTunnelOut = fromPeers("tunnelOut");

/** The newest value of a series that is not a gap, or null. */
export function latest(values: readonly (number | null)[]): number | null {
  for (let i = values.length - 1; i >= 0; i--) {
    const v = values[i];
    if (v !== null && v !== undefined) return v;
  }
  return null;
}

/** Rates of several series side by side on the same x: their keys prefixed, so each stays one line. */
export function merge(parts: { prefix: string; rates: Rates }[]): Rates {
  const first = parts[0];
  if (!first) return { x: [], series: [] };
  return {
    x: first.rates.x,
    series: parts.flatMap((p) => p.rates.series.map((s) => ({ key: `${p.prefix}${s.key}`, values: s.values }))),
  };
}
