/**
 * Resident memory of a process and of its whole tree (a node's llama-server and rpc-server children
 * with it), read from /proc, sampled on a timer into a series per process; and whether a stretch of
 * a series is flat within a tolerance.
 */
import { readFileSync } from "node:fs";
import { processTree } from "../harness/processes.ts";

/** VmRSS of `pid` in MiB, or undefined when it is gone. */
export function rssMiB(pid: number): number | undefined {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** RSS in MiB of `pid` and every descendant of it. */
export function treeRssMiB(pid: number): number | undefined {
  const own = rssMiB(pid);
  if (own === undefined) return undefined;
  const tree = processTree(pid);
  let sum = 0;
  for (const p of tree) sum += rssMiB(p) ?? 0;
  return sum;
}

export interface RssSample {
  /** ms since the soak began */
  at: number;
  own?: number;
  tree?: number;
}

/** Samples each pid every `everyMs` until stopped; `stop()` returns the series by label. */
export function sampleRss(pids: Record<string, number>, everyMs: number, clock: () => number): { stop(): Record<string, RssSample[]> } {
  const series: Record<string, RssSample[]> = Object.fromEntries(Object.keys(pids).map((k) => [k, []]));
  const take = () => {
    for (const [label, pid] of Object.entries(pids)) {
      const own = rssMiB(pid);
      series[label]!.push({ at: clock(), ...(own !== undefined ? { own, tree: treeRssMiB(pid) } : {}) });
    }
  };
  take();
  const timer = setInterval(take, everyMs);
  return {
    stop() {
      clearInterval(timer);
      take();
      return series;
    },
  };
}

/** (max - min) / min of the values, or undefined with fewer than two. */
export function spread(values: readonly number[]): number | undefined {
  if (values.length < 2) return undefined;
  const min = Math.min(...values);
  return (Math.max(...values) - min) / min;
}
