/** What one `bun test` process said, and the tables `npm test` prints at the end. */
import type { TestJob } from "./plan.ts";
import { durationKey } from "./plan.ts";

export interface Counts {
  pass: number;
  skip: number;
  todo: number;
  fail: number;
  /** Errors outside any test (an unhandled rejection between tests, a file that does not load). */
  error: number;
}

export const NO_COUNTS: Counts = { pass: 0, skip: 0, todo: 0, fail: 0, error: 0 };

/** bun test's closing summary: one ` N pass` line per kind (its format since 1.0). */
export function parseCounts(output: string): Counts {
  const counts = { ...NO_COUNTS };
  for (const m of output.matchAll(/^\s*(\d+) (pass|skip|todo|fail|errors?)\s*$/gm)) {
    const kind = m[2]!.startsWith("error") ? "error" : (m[2] as keyof Counts);
    counts[kind] += Number(m[1]);
  }
  return counts;
}

export const addCounts = (a: Counts, b: Counts): Counts => ({
  pass: a.pass + b.pass,
  skip: a.skip + b.skip,
  todo: a.todo + b.todo,
  fail: a.fail + b.fail,
  error: a.error + b.error,
});

export interface FileResult {
  job: TestJob;
  seconds: number;
  exitCode: number;
  counts: Counts;
  /** Why the runner stopped it, when it did. */
  killed?: string;
  /** This is the file's second run, alone (`runAgain`): how its first, beside the others, ended. */
  first?: FileResult;
}

/**
 * A file failed when bun said so, or exited non-zero, or passed nothing and skipped nothing
 * (a file that crashed before its summary).
 */
export const fileFailed = (r: FileResult) =>
  r.killed !== undefined || r.exitCode !== 0 || r.counts.fail > 0 || r.counts.error > 0 || r.counts.pass + r.counts.skip + r.counts.todo === 0;

const label = (r: FileResult) => durationKey(r.job);
const secs = (s: number) => `${s.toFixed(1).padStart(7)} s`;

/** The line printed as each file ends. */
export function fileLine(r: FileResult): string {
  const c = r.counts;
  const verdict = fileFailed(r) ? "FAIL" : "ok  ";
  const extra = r.killed ? `, ${r.killed}` : r.exitCode !== 0 && c.fail === 0 ? `, exit ${r.exitCode}` : "";
  const again = r.first ? ", run again alone" : "";
  return `${verdict} ${secs(r.seconds)}  ${label(r)}  (${c.pass} pass, ${c.skip} skip, ${c.fail} fail${extra}${again})`;
}

/** Failed tests, where a file that failed outside any test (or crashed) counts as one. */
export const failedTests = (results: FileResult[]) => results.reduce((n, r) => n + (fileFailed(r) ? Math.max(r.counts.fail, 1) : 0), 0);

/**
 * The end of a run: the slowest files, the flaky ones, the failed ones, the totals. `results` holds
 * one result a file: a file run again is there by its second run. The last line is the one CI reads.
 */
export function summary(results: FileResult[], wallS: number, slots: number, slowest = 10): string {
  const total = results.reduce((t, r) => addCounts(t, r.counts), NO_COUNTS);
  const failed = results.filter(fileFailed);
  const flaky = results.filter((r) => r.first && !fileFailed(r));
  const busyS = results.reduce((t, r) => t + r.seconds, 0);
  const lines = [
    "",
    `the slowest ${Math.min(slowest, results.length)} of ${results.length} files:`,
    ...[...results].sort((a, b) => b.seconds - a.seconds).slice(0, slowest).map((r) => `${secs(r.seconds)}  ${label(r)}`),
  ];
  if (flaky.length > 0) lines.push("", `${flaky.length} flaky (failed beside the others, passed run again alone; each a bug to fix, its first output above):`, ...flaky.map((r) => fileLine(r.first!)));
  if (failed.length > 0) lines.push("", `${failed.length} failed:`, ...failed.map(fileLine));
  lines.push(
    "",
    `${results.length} files in ${wallS.toFixed(0)} s, ${slots} at a time (${busyS.toFixed(0)} s of files, ${(busyS / Math.max(wallS, 1)).toFixed(1)} running on average)`,
    `total: ${total.pass} pass, ${total.skip} skip, ${total.todo} todo, ${failedTests(results)} fail`,
  );
  return lines.join("\n");
}

/** The last `n` lines of `text`, trailing blank lines left out. */
export function lastLines(text: string, n: number): string {
  return text.trimEnd().split("\n").slice(-n).join("\n");
}
