/**
 * A node's process tree from /proc: the children it started run in process groups of their own
 * (out of a terminal's Ctrl-C), so tests (and benches: the memory of a node with its children)
 * that look at "everything the node started" follow parent pids, not the node's group.
 */
import { readdirSync, readFileSync } from "node:fs";

export interface ProcessInfo {
  pid: number;
  cmdline: string;
  environ: string;
}

/** Parent pid of every live process. */
function parents(): Map<number, number> {
  const out = new Map<number, number>();
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      // The name in field 2 may hold spaces: count from its ')'. Field 4 is the parent pid.
      const stat = readFileSync(`/proc/${d}/stat`, "utf8");
      out.set(Number(d), Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** `pid` and every live process descended from it. */
export function processTree(pid: number): Set<number> {
  const parent = parents();
  const tree = new Set([pid]);
  // Parents come before children in no fixed order: repeat until nothing joins.
  for (let grew = true; grew; ) {
    grew = false;
    for (const [p, pp] of parent) if (!tree.has(p) && tree.has(pp)) (tree.add(p), (grew = true));
  }
  return tree;
}

/** Every live process descended from `pid` (not `pid` itself), with its command line and environment. */
export function descendantsOf(pid: number): ProcessInfo[] {
  const tree = processTree(pid);
  tree.delete(pid);
  const out: ProcessInfo[] = [];
  for (const p of tree) {
    try {
      out.push({ pid: p, cmdline: readFileSync(`/proc/${p}/cmdline`, "utf8").split("\0").join(" "), environ: readFileSync(`/proc/${p}/environ`, "utf8") });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}
