/**
 * The node's log: one line per event on stderr, readable text on a terminal or one JSON object per
 * line (`--log-format json`, for journald and log shippers).
 */
export type LogLevel = "debug" | "info" | "warn" | "error";
export type LogFields = Record<string, string | number | boolean | null | undefined>;

export interface Log {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
}

export function formatText(level: LogLevel, msg: string, fields: LogFields = {}): string {
  const extra = Object.entries(fields)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}=${typeof v === "string" && /\s|"/.test(v) ? JSON.stringify(v) : v}`);
  const tag = level === "info" ? "" : `${level.toUpperCase()} `;
  return [`${tag}${msg}`, ...extra].join(" ");
}

export function formatJson(level: LogLevel, msg: string, fields: LogFields = {}, now = new Date()): string {
  return JSON.stringify({ time: now.toISOString(), level, msg, ...fields });
}

/** `tap` also gets every line as data (the console's `LogRing`). */
export function createLog(
  format: "text" | "json",
  write: (line: string) => void = (l) => process.stderr.write(`${l}\n`),
  tap?: (level: LogLevel, msg: string, fields?: LogFields) => void,
): Log {
  const emit = (level: LogLevel) => (msg: string, fields?: LogFields) => {
    write(format === "json" ? formatJson(level, msg, fields) : formatText(level, msg, fields));
    tap?.(level, msg, fields);
  };
  return { debug: emit("debug"), info: emit("info"), warn: emit("warn"), error: emit("error") };
}
