/**
 * Keeps the children's log files bounded. A child writes its log through a descriptor opened for
 * appending, so a file cannot be renamed away under it (it would go on writing to the old one):
 * instead a file over the limit has its tail copied to `<name>.1` (replacing the previous one) and
 * is truncated in place, and the child's next line lands at its new start.
 */
import { closeSync, existsSync, openSync, readdirSync, readSync, statSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Log } from "../base/log.ts";

/** Over this a log is cut; the last `keep` bytes of it move to `.1`. */
export const LOG_LIMIT_BYTES = 16 * 2 ** 20;
export const LOG_KEEP_BYTES = 4 * 2 ** 20;

function tail(path: string, bytes: number, size: number): Buffer {
  const buf = Buffer.alloc(Math.min(bytes, size));
  const fd = openSync(path, "r");
  try {
    readSync(fd, buf, 0, buf.length, size - buf.length);
  } finally {
    closeSync(fd);
  }
  return buf;
}

/** Cuts every `*.log` in `dir` that is over `limit`; returns the ones it cut. */
export function capLogs(dir: string, limit = LOG_LIMIT_BYTES, keep = LOG_KEEP_BYTES): string[] {
  if (!existsSync(dir)) return [];
  const cut: string[] = [];
  for (const name of readdirSync(dir)) {
    if (!name.endsWith(".log")) continue;
    const path = join(dir, name);
    const size = statSync(path).size;
    if (size <= limit) continue;
    writeFileSync(`${path}.1`, tail(path, keep, size));
    truncateSync(path, 0);
    cut.push(name);
  }
  return cut;
}

/** Caps the logs in `dir` every `everyMs` for as long as the node runs (the timer holds no process open); stop it with `clearInterval`. */
export function capLogsEvery(dir: string, everyMs: number, log: Log): Timer {
  const timer = setInterval(() => {
    try {
      capLogs(dir);
    } catch (err) {
      log.warn("could not cap the child logs", { error: (err as Error).message });
    }
  }, everyMs);
  timer.unref();
  return timer;
}
