/**
 * What every llama.cpp child of the node shares: the tail of its log file for error messages, and
 * a stop that asks first (SIGTERM) and insists after a grace period (SIGKILL).
 */
import { closeSync, openSync, readSync, statSync } from "node:fs";
import type { Subprocess } from "bun";

export function readLogTail(path: string, bytes = 4000): string {
  try {
    const size = statSync(path).size;
    const fd = openSync(path, "r");
    try {
      const buf = Buffer.alloc(Math.min(bytes, size));
      readSync(fd, buf, 0, buf.length, size - buf.length);
      return buf.toString("utf8");
    } finally {
      closeSync(fd);
    }
  } catch {
    return "";
  }
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves once the process is gone. */
export async function terminate(proc: Subprocess, graceMs: number): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  proc.kill("SIGTERM");
  const timer = setTimeout(() => proc.kill("SIGKILL"), graceMs);
  await proc.exited;
  clearTimeout(timer);
}

/**
 * How long after a child exits on its own it is called a crash. Where the child shares the node's
 * process group (no setpriv, below), a signal to the whole group, such as a terminal's Ctrl-C,
 * reaches it as it reaches the node, and its exit may be seen before the node's own handler has
 * begun the shutdown that makes the exit expected.
 */
export const CRASH_VERDICT_DELAY_MS = 1000;

const SETPRIV = process.platform === "linux" ? Bun.which("setpriv") : null;

/** How a llama.cpp child is started: its argv, and whether it gets a session of its own. */
export interface ChildLaunch {
  argv: string[];
  detached: boolean;
}

/**
 * How to start a child that dies with the node, and only when the node stops it. On Linux,
 * util-linux `setpriv --pdeathsig KILL` sets the kernel's parent-death signal and then execs the
 * child (same pid), so it dies even when the node is killed with `kill -9`. Such a child also
 * leaves the node's process group (setsid): a terminal's Ctrl-C, or a kill of the node's group,
 * would otherwise kill it before the node stops it, and its exit would read as a crash. Without
 * setpriv the child stays in the node's group, where a kill of the group is what still ends it.
 */
export function childLaunch(argv: readonly string[], setpriv: string | null = SETPRIV): ChildLaunch {
  return setpriv ? { argv: [setpriv, "--pdeathsig", "KILL", "--", ...argv], detached: true } : { argv: [...argv], detached: false };
}
