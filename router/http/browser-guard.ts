/**
 * Keeps web pages out of the node's API. Any page the user visits can send requests to
 * 127.0.0.1:9337: a form or a `text/plain` fetch needs no CORS preflight, and a DNS name the page
 * rebinds to 127.0.0.1 even lets it read the answers. So requests from outside the mesh must name
 * this node in `Host` (a loopback name or address, when it listens on loopback), state-changing ones
 * must come from no page, the node's own origin or an `--cors-origin`, and management ones must say
 * `application/json` (which a page cannot send without a preflight), but for Lemonade's bodyless
 * "unload all" (a POST with no body and no type: nothing in it to misread, and a page's own still
 * fails the origin rule). `browserVerdict` decides
 * (pure); `browserGuard` applies it to requests from outside. Requests a peer forwarded carry the
 * mesh's marker (which `fromOutside` strips from everything else) and come from no browser.
 */
import type { MiddlewareHandler } from "hono";
import { isIPv4 } from "node:net";
import { errorResponse } from "./errors.ts";
import { asApiV1 } from "./route-table.ts";
import { FORWARDED_HEADER } from "../../mesh/mesh-headers.ts";

export interface BrowserPolicy {
  /** `--listen`: on loopback, only loopback names and addresses may stand in `Host`. */
  listen: string;
  /** `--cors-origin`: origins whose pages may call the API (normalized, as `parseOrigin` gives them). */
  corsOrigins: readonly string[];
}

export interface BrowserRequest {
  method: string;
  /** The `Host` header; null when the request had none. */
  host: string | null;
  origin: string | null;
  contentType: string | null;
  path: string;
  /** It has no body and says no type (no Content-Type, no Transfer-Encoding, no or a 0 Content-Length). */
  bodyless?: boolean;
}

export type BrowserVerdict =
  | { action: "pass"; allowOrigin?: string }
  /** A CORS preflight from an `--cors-origin`: answered 204 with what it may send. */
  | { action: "preflight"; allowOrigin: string }
  | { action: "refuse"; status: 403 | 415 | 421; code: string; message: string };

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);
/** Management POSTs that mean something with no body at all: Lemonade's "unload all". */
const BODYLESS_POSTS = new Set(["/api/v1/unload"]);
/** Where state-changing requests must say JSON: the management and Ollama routes, under every Lemonade base. */
const needsJson = (path: string) => path.startsWith("/api/") || path.startsWith("/v0/");
export const CORS_METHODS = "GET, HEAD, POST, OPTIONS";
export const CORS_HEADERS = ["authorization", "content-type", "x-api-key"];

/** The host name of a `Host` header, without port or IPv6 brackets, lowercase; undefined when malformed. */
export function hostName(host: string): string | undefined {
  const m = /^(\[[0-9a-f:.]+\]|[^:[\]\s/@]+)(?::(\d{1,5}))?$/i.exec(host.trim());
  return m ? m[1]!.toLowerCase().replace(/^\[|\]$/g, "") : undefined;
}

const isLoopback = (h: string) => h === "localhost" || h === "::1" || (isIPv4(h) && h.startsWith("127."));

/**
 * Whether a request naming `host` is meant for this node. A rebinding page can only put a DNS name
 * of its own there, so a node listening on loopback answers loopback names and addresses only.
 * One listening beyond loopback is reached by whatever names the network gives it (`gpu-box`,
 * `host.docker.internal`, a reverse proxy's), is guarded by its API keys (a page cannot send one
 * without a preflight, which only `--cors-origin`s pass), and is no more exposed to a rebinding page
 * than to any machine on that network; Ollama draws the same line.
 */
export function hostAllowed(host: string, listen: string): boolean {
  const name = hostName(host);
  if (name === undefined) return false;
  if (isLoopback(name)) return true;
  const own = listen.toLowerCase().replace(/^\[|\]$/g, "");
  return !isLoopback(own);
}

/** The media type of a Content-Type header, without parameters, lowercase. */
const mediaType = (contentType: string | null) => (contentType ?? "").split(";")[0]!.trim().toLowerCase();

export function browserVerdict(req: BrowserRequest, policy: BrowserPolicy): BrowserVerdict {
  const method = req.method.toUpperCase();
  if (req.host === null || !hostAllowed(req.host, policy.listen)) {
    const named = req.host === null ? "no Host" : `Host "${req.host.slice(0, 100)}"`;
    return {
      action: "refuse",
      status: 421,
      code: "misdirected_request",
      message: `this node listens on ${policy.listen} and answers only requests addressed to localhost, 127.0.0.1 or [::1]; the request named ${named} (a web page reaching the node through a DNS name it controls looks like this; to serve other names, --listen beyond loopback with an --api-key)`,
    };
  }
  const origin = req.origin;
  const listed = origin !== null && policy.corsOrigins.includes(origin.toLowerCase()) ? origin.toLowerCase() : undefined;
  if (method === "OPTIONS") {
    if (listed) return { action: "preflight", allowOrigin: listed };
    return {
      action: "refuse",
      status: 403,
      code: "origin_not_allowed",
      message: `CORS preflight refused: ${origin === null ? "no Origin" : `origin "${origin.slice(0, 200)}"`} is not one of the node's --cors-origin values`,
    };
  }
  if (!SAFE_METHODS.has(method) && origin !== null && !listed && origin.toLowerCase() !== `http://${req.host.toLowerCase()}`) {
    return {
      action: "refuse",
      status: 403,
      code: "origin_not_allowed",
      message: `${method} from a web page at "${origin.slice(0, 200)}" refused: pages may change nothing on this node unless it was started with --cors-origin ${origin === "null" ? "<their origin>" : origin.slice(0, 200)}`,
    };
  }
  const bodylessOk = req.bodyless === true && method === "POST" && BODYLESS_POSTS.has(asApiV1(req.path));
  if (!SAFE_METHODS.has(method) && needsJson(req.path) && !bodylessOk && mediaType(req.contentType) !== "application/json") {
    return {
      action: "refuse",
      status: 415,
      code: "unsupported_media_type",
      message: `management requests need Content-Type: application/json (got ${req.contentType === null ? "none" : `"${req.contentType.slice(0, 100)}"`}); curl: add -H 'Content-Type: application/json'`,
    };
  }
  return listed ? { action: "pass", allowOrigin: listed } : { action: "pass" };
}

/** Header names a preflight asks for, if they are all plain tokens (else only our own list). */
function requestedHeaders(asked: string | undefined): string[] {
  const names = (asked ?? "").split(",").map((h) => h.trim().toLowerCase()).filter(Boolean);
  return names.length <= 32 && names.every((h) => /^[a-z0-9-]{1,64}$/.test(h)) ? names : [];
}

/** Applies `browserVerdict` to every request from outside the mesh. */
export function browserGuard(policy: BrowserPolicy): MiddlewareHandler {
  return async (c, next) => {
    if (c.req.header(FORWARDED_HEADER) !== undefined) return next();
    const verdict = browserVerdict(
      {
        method: c.req.method,
        host: c.req.header("host") ?? null,
        origin: c.req.header("origin") ?? null,
        contentType: c.req.header("content-type") ?? null,
        path: c.req.path,
        bodyless: c.req.header("content-type") === undefined && c.req.header("transfer-encoding") === undefined && (c.req.header("content-length") ?? "0").trim() === "0",
      },
      policy,
    );
    if (verdict.action === "refuse") return errorResponse(c, verdict.status, verdict.message, "invalid_request_error", verdict.code);
    if (verdict.action === "preflight") {
      const headers = [...new Set([...CORS_HEADERS, ...requestedHeaders(c.req.header("access-control-request-headers"))])];
      return c.body(null, 204, {
        "Access-Control-Allow-Origin": verdict.allowOrigin,
        "Access-Control-Allow-Methods": CORS_METHODS,
        "Access-Control-Allow-Headers": headers.join(", "),
        "Access-Control-Max-Age": "600",
        Vary: "Origin",
      });
    }
    await next();
    if (!verdict.allowOrigin) return;
    // A proxied answer's headers may be immutable: set them on a copy.
    const res = new Response(c.res.body, c.res);
    res.headers.set("Access-Control-Allow-Origin", verdict.allowOrigin);
    res.headers.append("Vary", "Origin");
    c.res = undefined;
    c.res = res;
  };
}
