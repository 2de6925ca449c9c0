/**
 * Parsers for flag values. Each takes the text a user typed and returns the value or throws an
 * Error whose message says what was expected; the CLI turns that into exit code 2.
 */

export function parsePort(text: string): number {
  if (!/^\d+$/.test(text)) throw new Error(`expected a port number 0-65535, got "${text}"`);
  const n = Number(text);
  if (n > 65535) throw new Error(`expected a port number 0-65535, got "${text}"`);
  return n;
}

export function parseCount(text: string): number {
  if (!/^\d+$/.test(text)) throw new Error(`expected a whole number >= 0, got "${text}"`);
  return notTooLarge(Number(text), text);
}

/** Beyond 2^53 a number is no longer exact (and 400 digits are Infinity): no count or size is that large. */
function notTooLarge(n: number, text: string): number {
  if (!Number.isSafeInteger(n)) throw new Error(`"${text}" is too large (at most ${Number.MAX_SAFE_INTEGER})`);
  return n;
}

export function parsePositive(text: string): number {
  const n = /^\d+$/.test(text) ? Number(text) : 0;
  if (n < 1) throw new Error(`expected a whole number >= 1, got "${text}"`);
  return notTooLarge(n, text);
}

/** Requests that may wait for one model's slots (`--max-queue`): peers read a queue's depth up to a million. */
export const MAX_QUEUE_BOUND = 100_000;

export function parseMaxQueue(text: string): number {
  if (!/^\d+$/.test(text) || Number(text) > MAX_QUEUE_BOUND) throw new Error(`expected a whole number from 0 to ${MAX_QUEUE_BOUND}, got "${text}"`);
  return Number(text);
}

/** `-1` means no limit. */
export function parseModelLimit(text: string): number {
  if (!/^-?\d+$/.test(text)) throw new Error(`expected a whole number >= 1, or -1 for no limit, got "${text}"`);
  const n = Number(text);
  if (n === 0 || n < -1) throw new Error(`expected a whole number >= 1, or -1 for no limit, got "${text}"`);
  return notTooLarge(n, text);
}

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** The longest a timer waits: setTimeout fires at once when asked for more (2^31 - 1 ms, 24.8 days). */
const MAX_DURATION_MS = 2 ** 31 - 1;

/** Milliseconds from `0`, `90s`, `30m`, `1h30m`, `500ms`; a bare number is seconds; at most 24d. */
export function parseDuration(text: string): number {
  const ms = durationMs(text);
  if (!(ms <= MAX_DURATION_MS)) throw new Error(`expected a duration of at most 24d (no timer waits longer), got "${text}"`);
  return ms;
}

/** A guest pass's lifetime, `7d`, `12h`, `90d`: no timer waits on it, so up to ten years. */
export function parseLifetime(text: string): number {
  const ms = durationMs(text);
  if (!(ms > 0 && ms <= 3650 * 86_400_000)) throw new Error(`expected a lifetime like 12h, 7d or 90d (at most 3650d), got "${text}"`);
  return ms;
}

function durationMs(text: string): number {
  const t = text.trim().toLowerCase();
  if (/^\d+(\.\d+)?$/.test(t)) return Math.round(Number(t) * 1000);
  const parts = [...t.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h|d)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join("") !== t) {
    throw new Error(`expected a duration like 30m, 1h30m, 90s or 0, got "${text}"`);
  }
  return Math.round(parts.reduce((sum, p) => sum + Number(p[1]) * DURATION_UNITS[p[2]!]!, 0));
}

const SIZE_UNITS: Record<string, number> = {
  "": 1,
  b: 1,
  k: 1e3, kb: 1e3, kib: 2 ** 10,
  m: 1e6, mb: 1e6, mib: 2 ** 20,
  g: 1e9, gb: 1e9, gib: 2 ** 30,
  t: 1e12, tb: 1e12, tib: 2 ** 40,
};

/** Bytes from `24GB`, `24GiB`, `512M`, `1.5T`, `1073741824`. */
export function parseSize(text: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/i.exec(text.trim());
  const unit = m ? SIZE_UNITS[m[2]!.toLowerCase()] : undefined;
  if (!m || unit === undefined) throw new Error(`expected a size like 24GB, 16GiB or 512MB, got "${text}"`);
  const bytes = Math.round(Number(m[1]) * unit);
  if (!Number.isSafeInteger(bytes)) throw new Error(`expected a size up to 9000TB, got "${text}"`);
  return bytes;
}

/** `HOST:PORT`, with IPv6 hosts in brackets (`[::1]:0`). */
export function parseHostPort(text: string): { host: string; port: number } {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^:[\]\s]+):(\d+)$/.exec(text);
  if (!m) throw new Error(`expected HOST:PORT (e.g. 127.0.0.1:0 or [::1]:4433), got "${text}"`);
  return { host: m[1]!.replace(/^\[|\]$/g, ""), port: parsePort(m[2]!) };
}

export function parseChoice<T extends string>(choices: readonly T[]): (text: string) => T {
  return (text) => {
    const found = choices.find((c) => c === text);
    if (found === undefined) throw new Error(`expected one of ${choices.join(", ")}, got "${text}"`);
    return found;
  };
}

export function parseNonEmpty(text: string): string {
  if (text.trim() === "") throw new Error("expected a value, got an empty string");
  return text;
}

/** An http(s) URL, without a trailing slash. */
export function parseUrl(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new Error(`expected a URL like https://api.github.com, got "${text}"`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new Error(`expected an http or https URL, got "${text}"`);
  return text.replace(/\/+$/, "");
}

/** true/false, as a flag's presence, an environment variable or a config file gives it. */
export function parseBoolean(text: string): boolean {
  if (/^(true|1|yes|on)$/i.test(text)) return true;
  if (/^(false|0|no|off)$/i.test(text)) return false;
  throw new Error(`expected true or false, got "${text}"`);
}

/**
 * A web origin, `scheme://host[:port]`, as browsers send it in `Origin` (lowercase, no default
 * port, no path). `null` and `*` are refused: neither names one site.
 */
export function parseOrigin(text: string): string {
  const expected = `expected an origin like https://app.example, http://localhost:3000 or app://obsidian.md, got "${text}"`;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new Error(expected);
  }
  // Built by hand: URL.origin is "null" for schemes outside http(s) (app://, chrome-extension://),
  // whose pages send their origin all the same.
  const origin = `${url.protocol}//${url.host}`.toLowerCase();
  if (!/^[a-z][a-z0-9+.-]*:$/.test(url.protocol) || !url.host || url.username || url.password) throw new Error(expected);
  if (text.replace(/\/$/, "").toLowerCase() !== origin) throw new Error(`${expected} (an origin has no path, query or default port)`);
  return origin;
}

/** Whole seconds from a duration, 1 to 255 (the most Bun's server takes). */
export function parseIdleTimeout(text: string): number {
  const ms = parseDuration(text);
  if (ms % 1000 !== 0 || ms < 1000 || ms > 255_000) throw new Error(`expected whole seconds from 1s to 255s, got "${text}"`);
  return ms / 1000;
}

/**
 * A node id, whole (its 64 hex digits, as `mesh status --json` shows them: a prefix could be met by
 * a key ground to match it), or `self`.
 */
export function parseHostId(text: string): string {
  const id = text.trim().toLowerCase();
  if (id === "self" || /^[0-9a-f]{64}$/.test(id)) return id;
  throw new Error(`expected a node id (all 64 hex digits, as mesh status --json shows it) or self, got "${text}"`);
}

/**
 * `--media-hosts`: host names or IPs, comma-separated (`nas.local,192.168.1.20,fd00::5`), as URLs
 * write them (lower case, IPv6 without brackets); a host only: no scheme, port or path.
 */
export function parseMediaHosts(text: string): string[] {
  const hosts = text.split(",").map((t) => t.trim()).filter(Boolean);
  if (hosts.length === 0) throw new Error(`expected host names or IPs separated by commas, e.g. nas.local,192.168.1.20, got "${text}"`);
  return hosts.map((host) => {
    let url: URL | undefined;
    try {
      url = new URL(`http://${host.includes(":") && !host.startsWith("[") ? `[${host}]` : host}/`);
    } catch {
      url = undefined;
    }
    if (!url || url.pathname !== "/" || url.port || url.username || url.password || url.search || url.hash) {
      throw new Error(`expected a host name or IP (no scheme, port or path), got "${host}"`);
    }
    return url.hostname.replace(/^\[|\]$/g, "").replace(/\.$/, "");
  });
}
