/**
 * The node's recent log lines, kept in memory for the console (`/api/console/events`): the last
 * `CONSOLE_LIMITS.logLines`, each message and field cut to a bound, and listeners told of each new
 * line. Nothing here is written anywhere: the log itself still goes to stderr.
 */
import { CONSOLE_LIMITS, type LogLine } from "../console/protocol.ts";
import type { LogFields, LogLevel } from "./log.ts";

const MAX_TEXT = 2_000;
const cut = (s: string) => (s.length > MAX_TEXT ? `${s.slice(0, MAX_TEXT)}…` : s);

export class LogRing {
  private readonly lines: LogLine[] = [];
  private readonly listeners = new Set<(line: LogLine) => void>();
  private seq = 0;

  constructor(private readonly max: number = CONSOLE_LIMITS.logLines) {}

  add(level: LogLevel, msg: string, fields: LogFields = {}, at = Date.now()): void {
    const kept: LogLine["fields"] = {};
    for (const [k, v] of Object.entries(fields)) if (v !== undefined) kept[k] = typeof v === "string" ? cut(v) : v;
    const line: LogLine = { seq: ++this.seq, at, level, msg: cut(msg), fields: kept };
    this.lines.push(line);
    if (this.lines.length > this.max) this.lines.splice(0, this.lines.length - this.max);
    for (const listener of this.listeners) {
      // A listener is a page's stream: one that fails must not break the log call that fed it, nor the others.
      try {
        listener(line);
      } catch {
        this.listeners.delete(listener);
      }
    }
  }

  recent(): LogLine[] {
    return [...this.lines];
  }

  /** Calls `listener` with every line from now on, until the returned function is called. */
  subscribe(listener: (line: LogLine) => void): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }
}
