/**
 * A warning that strangers can cause (a failed handshake, an unproved connection) is written at
 * most once per interval, with how many times it happened since the last line: each of them costs
 * the stranger a packet and the node a line of disk and of every console's log.
 */
import type { Log, LogFields } from "./log.ts";

export const WARNING_EVERY_MS = 10_000;

export function throttledWarning(log: Log, msg: string, everyMs = WARNING_EVERY_MS): (fields: LogFields) => void {
  let last = -Infinity;
  let count = 0;
  return (fields) => {
    count++;
    if (Date.now() - last < everyMs) return;
    last = Date.now();
    log.warn(msg, { ...fields, count });
    count = 0;
  };
}
