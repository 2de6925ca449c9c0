/**
 * API keys: with any `--api-key`, `/v1/*` and `/api/*` need `Authorization: Bearer <key>` (or
 * `x-api-key`, which Anthropic-style clients send); `/health` stays open. Requests a peer forwards
 * over the mesh come through the mesh's own authentication and carry no key.
 */
import { timingSafeEqual } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import { errorResponse } from "./errors.ts";
import { FORWARDED_HEADER } from "../../mesh/mesh-headers.ts";

const digest = (text: string) => new Bun.CryptoHasher("sha256").update(text).digest();

/** The key a request presents, if any (pure). */
export function presentedKey(headers: { get(name: string): string | null }): string | undefined {
  const auth = headers.get("authorization");
  const bearer = auth && /^Bearer\s+(.+)$/i.exec(auth.trim())?.[1];
  return bearer || headers.get("x-api-key") || undefined;
}

/** Whether `key` is one of `keys`, compared in constant time (hashes first, so lengths do not leak). */
export function keyMatches(key: string, keys: readonly string[]): boolean {
  const presented = digest(key);
  let ok = false;
  for (const k of keys) ok = timingSafeEqual(presented, digest(k)) || ok;
  return ok;
}

declare module "hono" {
  interface ContextVariableMap {
    /**
     * The key this request presented when it was one of the node's `--api-key` values. Only such a
     * key names a request's fair-queue turn: with no `--api-key`, any bearer value a client
     * invents would be a new turn of its own.
     */
    acceptedKey: string;
  }
}

export function requireApiKey(keys: readonly string[]): MiddlewareHandler {
  return async (c, next) => {
    if (keys.length === 0 || c.req.header(FORWARDED_HEADER) !== undefined) return next();
    const key = presentedKey(c.req.raw.headers);
    if (key && keyMatches(key, keys)) {
      c.set("acceptedKey", key);
      return next();
    }
    c.header("WWW-Authenticate", 'Bearer realm="mesh"');
    const why = key ? "the API key is not valid" : "an API key is required";
    return errorResponse(c, 401, `${why}: send Authorization: Bearer <key> with one of the node's --api-key values`, "invalid_request_error", "invalid_api_key");
  };
}

/**
 * A request from outside must not pass for one a peer forwarded: the marker is removed here, and
 * only the mesh's own handler (behind its authentication) sets it.
 */
export function fromOutside(req: Request): Request {
  if (!req.headers.has(FORWARDED_HEADER)) return req;
  const headers = new Headers(req.headers);
  headers.delete(FORWARDED_HEADER);
  // Built from the URL, not from `req`: Bun keeps a Request's own headers when the new ones are
  // empty (the marker was the only header), which would let the marker through.
  const init: RequestInit = { method: req.method, headers, body: req.body, signal: req.signal, duplex: "half" };
  return new Request(req.url, init);
}
