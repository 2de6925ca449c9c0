/**
 * What a request from a socket goes through before the app: the cap on requests in flight (503
 * beyond it), a Host it must name, the mesh's forwarded marker removed, and the connection's idle
 * timeout lifted while the handler works. Requests peers forward reach the app by the mesh, not through here.
 *
 * Bun's `idleTimeout` counts a connection idle whenever none of the client's bytes arrive,
 * whatever the handler is doing and whatever it writes. Measured with Bun 1.4.5 and
 * `idleTimeout: 2`: a stalled body (Content-Length 1000, 3 bytes sent) was closed after 3 s
 * (good); but a handler sleeping 5 s was reset at 4 s, and so was a streamed answer writing every
 * 200 ms; `server.timeout(req, 0)` let both finish. So once the request has been read whole
 * (`bodyRead`) its timeout is lifted, and put back when the answer is done: with its head for a
 * whole answer (measured: a keep-alive connection whose request lifted it stayed open idle for good
 * unless it was put back), at its end for a streamed one (SSE, NDJSON: a generation or a pull's
 * progress may go on for many minutes). A streamed answer that its client stops reading is cut by
 * our own watch instead (`watchReader`), after as long as the idle timeout, so it cannot hold its
 * model's slot for good.
 */
import type { Hono } from "hono";
import { fromOutside } from "./http/api-keys.ts";
import type { AppEnv } from "./app.ts";
import { openAiError } from "./http/errors.ts";
import { tapStream } from "./http/stream-tap.ts";

export interface FrontDoorOptions {
  /** `--max-connections`: requests in flight (answers still streaming included) before 503. */
  maxConnections: number;
  /** `--idle-timeout`, in seconds, as Bun.serve was given it. */
  idleTimeoutS: number;
  /** Requests in flight on the node's other listeners (`--ollama-listen`): one cap for them all. */
  elsewhere?: () => number;
}

/** What the front door uses of Bun's server. */
export interface ServerControls {
  /** Requests in flight, this one and answers still streaming included. */
  readonly pendingRequests: number;
  timeout(req: Request, seconds: number): void;
}

const RETRY_AFTER_S = 1;

function overloaded(max: number): Response {
  const error = openAiError(
    `the node is answering ${max} requests at once, its limit (--max-connections); retry shortly`,
    "service_unavailable",
    "too_many_connections",
  );
  return Response.json(error, { status: 503, headers: { "Retry-After": String(RETRY_AFTER_S) } });
}

/**
 * A request with no Host (HTTP/1.0) reaches Bun's handler with a bare path for its URL, which no
 * copy of the Request (`fromOutside`) and no router takes; no browser sends one either.
 */
function noHost(): Response {
  const error = openAiError("the request has no Host header; send one naming this node (localhost, 127.0.0.1 or its --listen address)", "invalid_request_error", "misdirected_request");
  return Response.json(error, { status: 421 });
}

/**
 * What Bun answers when the handler itself throws (the app catches its own errors): OpenAI's
 * shape, not Bun's development page, which shows the node's source and paths to whoever asked.
 */
export function crashed(err: Error): Response {
  const error = openAiError(`the node failed to handle the request: ${err.message.split("\n")[0]!.slice(0, 200)}`, "server_error");
  return Response.json(error, { status: 500 });
}

export function frontDoor(app: Hono<AppEnv>, opts: FrontDoorOptions): (req: Request, server: ServerControls) => Promise<Response> {
  return async (req, server) => {
    if (server.pendingRequests + (opts.elsewhere?.() ?? 0) > opts.maxConnections) return overloaded(opts.maxConnections);
    if (!req.headers.has("host")) return noHost();
    // On the original request: Bun knows its connection, not a copy's.
    const setTimeout = (seconds: number) => {
      try {
        server.timeout(req, seconds);
      } catch {
        // the client is gone already
      }
    };
    let lifted = false;
    const hooks = {
      bodyRead: () => {
        lifted = true;
        setTimeout(0);
      },
    };
    let res: Response;
    try {
      res = await app.fetch(fromOutside(req), { connection: hooks });
    } catch (err) {
      if (lifted) setTimeout(opts.idleTimeoutS);
      throw err;
    }
    if (!lifted) return res;
    // The head first: a whole answer's body is never touched (Bun makes a stream of it when asked).
    if (!isStreamed(res) || !res.body) {
      setTimeout(opts.idleTimeoutS);
      return res;
    }
    const body = watchReader(res.body, opts.idleTimeoutS * 1000, () => setTimeout(opts.idleTimeoutS));
    // The same answer when its body is a tap already (a proxied stream's): the watch joined it.
    return body === res.body ? res : new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

/** Answers that go on as long as their work does: a generation's SSE, a pull's NDJSON or SSE. */
function isStreamed(res: Response): boolean {
  const type = res.headers.get("content-type") ?? "";
  return type.includes("text/event-stream") || type.includes("application/x-ndjson");
}

/**
 * `body` passed on as the client reads it, with `ended` called once when it ends either way. A
 * client that asks for nothing more for `stallMs` after a chunk went its way has stopped reading:
 * the body is cancelled (its producer, a proxied server's stream, lets its slot go) and the answer cut.
 */
export function watchReader(body: ReadableStream<Uint8Array>, stallMs: number, ended: () => void): ReadableStream<Uint8Array> {
  let over = false;
  const end = () => {
    if (over) return;
    over = true;
    ended();
  };
  return tapStream(body, {
    onEnd: end,
    onCancel: end,
    onStall: {
      side: "client",
      ms: stallMs,
      call: () => {
        end();
        return undefined;
      },
    },
  });
}

/** How often a quiet SSE stream gets a keep-alive: well inside the idle timeout that would cut it. */
export function keepAliveMsFor(idleTimeoutS: number): number {
  return Math.min(15_000, (idleTimeoutS * 1000) / 2);
}
