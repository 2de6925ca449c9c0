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

const SETPRIV = process.platform === "linux" ? Bun.which("setpriv") : null;

/**
 * argv that makes the child die with the node, even when the node is killed with `kill -9` and
 * cannot stop it: on Linux, util-linux `setpriv --pdeathsig KILL` sets the kernel's parent-death
 * signal and then execs the child (same pid). Without setpriv the child is started as it is.
 */
export function diesWithParent(argv: readonly string[]): string[] {
  return SETPRIV ? [SETPRIV, "--pdeathsig", "KILL", "--", ...argv] : [...argv];
}
