/**
 * Which log lines the Logs tab shows (pure): those at or above the chosen level, and, when a text
 * is given, those whose message or fields contain it (case-insensitive).
 */
import type { LogLevel, LogLine } from "../protocol.ts";

export const LEVELS: readonly LogLevel[] = ["debug", "info", "warn", "error"];

const rank = (l: LogLevel): number => LEVELS.indexOf(l);

export const atLeast = (level: LogLevel, min: LogLevel): boolean => rank(level) >= rank(min);

export function fieldsText(fields: LogLine["fields"]): string {
  return Object.entries(fields)
    .map(([k, v]) => `${k}=${typeof v === "string" && /\s/.test(v) ? JSON.stringify(v) : String(v)}`)
    .join(" ");
}

export function filterLogs(lines: readonly LogLine[], min: LogLevel, text: string): LogLine[] {
  const needle = text.trim().toLowerCase();
  return lines.filter(
    (l) => atLeast(l.level, min) && (needle === "" || l.msg.toLowerCase().includes(needle) || fieldsText(l.fields).toLowerCase().includes(needle)),
  );
}
