/**
 * What the soak prints, worked out from its records (pure): per phase (before the kill, across it,
 * after it) and model, requests, completions, clean errors by status, unclean ends, hangs, and p50/p99
 * of latency and time to first token over the completed requests; and the RSS series of each node,
 * a few points of it, with whether its second half is flat within the tolerance.
 */
import { pct } from "./report.ts";
import { spread, type RssSample } from "./rss.ts";
import type { RequestRecord } from "./soak-client.ts";

export type Phase = "before kill" | "across kill" | "after kill";
export const PHASES: readonly Phase[] = ["before kill", "across kill", "after kill"];

/** Where a request falls: wholly before the kill, started before and ended after, or started after. */
export function phaseOf(r: RequestRecord, killAt: number): Phase {
  if (r.start >= killAt) return "after kill";
  return r.end < killAt ? "before kill" : "across kill";
}

const ms = (xs: number[], p: number) => (xs.length ? pct(xs, p).toFixed(0) : "-");

function countBy(keys: string[]): string {
  const counts = new Map<string, number>();
  for (const k of keys) counts.set(k, (counts.get(k) ?? 0) + 1);
  return [...counts].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${n}× ${k}`).join(", ") || "-";
}

export const PHASE_HEADER = ["phase", "model", "requests", "completed", "clean errors (by status)", "unclean ends", "hangs", "latency p50/p99 (ms)", "first token p50/p99 (ms)"];

/** Rows of the phase table: each phase by model, then all models together. */
export function phaseRows(records: readonly RequestRecord[], killAt: number, models: readonly string[]): string[][] {
  const rows: string[][] = [];
  for (const phase of PHASES) {
    const inPhase = records.filter((r) => phaseOf(r, killAt) === phase);
    for (const model of [...models, "all"]) {
      const rs = inPhase.filter((r) => model === "all" || r.model === model);
      const done = rs.filter((r) => r.outcome.kind === "completed");
      const errors = rs.flatMap((r) => (r.outcome.kind === "error" ? [r.outcome.status] : []));
      const unclean = rs.flatMap((r) => (r.outcome.kind === "unclean" ? [r.outcome.what] : []));
      const hangs = rs.filter((r) => r.outcome.kind === "hang").length;
      const lat = done.map((r) => r.end - r.start);
      const ttft = done.flatMap((r) => (r.ttft !== undefined ? [r.ttft] : []));
      rows.push([phase, model, String(rs.length), String(done.length), countBy(errors), unclean.length ? countBy(unclean) : "0", String(hangs), `${ms(lat, 50)} / ${ms(lat, 99)}`, `${ms(ttft, 50)} / ${ms(ttft, 99)}`]);
    }
  }
  return rows;
}

/** The first message seen for each error status, so a finding can be traced to its source. */
export function errorMessages(records: readonly RequestRecord[]): string[] {
  const first = new Map<string, string>();
  for (const r of records) {
    const key = `${r.model}, ${r.outcome.kind === "error" ? r.outcome.status : ""}`;
    if (r.outcome.kind === "error" && !first.has(key)) first.set(key, `${r.outcome.message} (at ${(r.start / 1000).toFixed(1)} s)`);
  }
  return [...first].map(([key, message]) => `${key}: ${message}`);
}

/** `points` samples spread evenly over the series (first and last included). */
function thin<T>(xs: readonly T[], points: number): T[] {
  if (xs.length <= points) return [...xs];
  return Array.from({ length: points }, (_, i) => xs[Math.round((i * (xs.length - 1)) / (points - 1))]!);
}

export const RSS_HEADER = ["node", "mesh process RSS, MiB (t in s)", "with its llama.cpp children, MiB", "mesh RSS, 2nd half: spread (first -> last MiB)", "flat within 10%?"];

/** A row per node: a few points of its series, and the spread of its mesh process's RSS after `halfAt`. */
export function rssRows(series: Record<string, RssSample[]>, halfAt: number, tolerance = 0.1, points = 8): string[][] {
  return Object.entries(series).map(([label, samples]) => {
    const live = samples.filter((s) => s.own !== undefined);
    const shown = thin(live, points);
    const own = shown.map((s) => `${(s.at / 1000).toFixed(0)}s:${s.own!.toFixed(0)}`).join(" ");
    const tree = shown.map((s) => (s.tree ?? 0).toFixed(0)).join(" ");
    const second = live.filter((s) => s.at >= halfAt).map((s) => s.own!);
    const sp = spread(second);
    const verdict = sp === undefined ? (live.length < samples.length ? "n/a (killed)" : "n/a (too few samples)") : sp <= tolerance ? "yes" : "NO";
    const ends = second.length ? ` (${second[0]!.toFixed(0)} -> ${second.at(-1)!.toFixed(0)})` : "";
    return [label, own, tree, sp === undefined ? "-" : `${(sp * 100).toFixed(1)}%${ends}`, verdict];
  });
}
