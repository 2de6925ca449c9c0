/**
 * How the page writes numbers for people (pure): byte sizes, byte rates, durations, ages, rates
 * and clock times. Every function takes what the protocol carries and returns a short string;
 * a missing value is an em dash, never "NaN" or "undefined".
 */

export const DASH = "—";

const BYTE_UNITS = ["B", "KB", "MB", "GB", "TB", "PB"] as const;

/** Binary multiples (1 KB = 1024 B), as memory is counted; one decimal below 10, none above. */
export function formatBytes(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined || !Number.isFinite(bytes) || bytes < 0) return DASH;
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < BYTE_UNITS.length - 1) {
    value /= 1024;
    unit++;
  }
  if (unit === 0) return `${Math.round(value)} B`;
  const digits = value < 10 ? 1 : 0;
  return `${value.toFixed(digits)} ${BYTE_UNITS[unit]}`;
}

export const formatByteRate = (bytesPerS: number | null | undefined): string =>
  bytesPerS === null || bytesPerS === undefined || !Number.isFinite(bytesPerS) ? DASH : `${formatBytes(bytesPerS)}/s`;

/** A span of seconds in its two largest units: `45s`, `3m 05s`, `2h 10m`, `4d 3h`. */
export function formatDuration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds) || seconds < 0) return DASH;
  const s = Math.floor(seconds);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${String(s % 60).padStart(2, "0")}s`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h}h ${String(m % 60).padStart(2, "0")}m`;
  return `${Math.floor(h / 24)}d ${h % 24}h`;
}

/** Milliseconds as people read a latency: `850 µs`, `12.3 ms`, `340 ms`, `1.25 s`. */
export function formatMs(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms) || ms < 0) return DASH;
  if (ms < 1) return `${Math.round(ms * 1000)} µs`;
  if (ms < 100) return `${ms.toFixed(1)} ms`;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  return `${(ms / 1000).toFixed(2)} s`;
}

/** A round trip as QUIC reports it, in whole milliseconds: 0 is under one. */
export function formatRtt(ms: number | null | undefined): string {
  return ms === 0 ? "< 1 ms" : formatMs(ms);
}

/** How long ago, from a count of milliseconds: `just now` under a second. */
export function formatAgo(msAgo: number | null | undefined): string {
  if (msAgo === null || msAgo === undefined || !Number.isFinite(msAgo) || msAgo < 0) return DASH;
  if (msAgo < 1000) return "just now";
  return `${formatDuration(msAgo / 1000)} ago`;
}

/** A rate with a unit: three significant figures at most, `0` for nothing. */
export function formatRate(value: number | null | undefined, unit: string): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return DASH;
  if (value === 0) return `0 ${unit}`;
  const digits = Math.abs(value) >= 100 ? 0 : Math.abs(value) >= 10 ? 1 : 2;
  return `${value.toFixed(digits)} ${unit}`;
}

export const formatPercent = (fraction: number): string =>
  Number.isFinite(fraction) ? `${Math.round(fraction * 100)}%` : DASH;

/** A clock time of day with seconds, in the viewer's zone (log lines). */
export function formatClock(at: number): string {
  const d = new Date(at);
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${String(d.getMilliseconds()).padStart(3, "0")}`;
}

/** The node ids' short form, as the node's own status lines write it. */
export const shortId = (id: string): string => id.slice(0, 10);

/** A number for a chart axis: short, no unit (`0.5`, `12`, `1.2k`, `3.4M`). */
export function formatCompact(v: number): string {
  if (!Number.isFinite(v)) return DASH;
  const a = Math.abs(v);
  if (a >= 1e9) return `${+(v / 1e9).toFixed(1)}G`;
  if (a >= 1e6) return `${+(v / 1e6).toFixed(1)}M`;
  if (a >= 1e3) return `${+(v / 1e3).toFixed(1)}k`;
  if (a >= 10 || a === 0) return `${Math.round(v)}`;
  return `${+v.toPrecision(2)}`;
}
