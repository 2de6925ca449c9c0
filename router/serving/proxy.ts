/**
 * Forwards one OpenAI request to the llama-server that serves its model and passes the answer back:
 * JSON whole, SSE unbuffered event by event. The request holds its server (no eviction) until the
 * answer is complete or the client goes away; a client that disconnects aborts the upstream
 * request; a server that dies mid-answer ends the stream with an error event instead of a hang.
 * A stream quiet for 15 s (a long prompt being read) gets an SSE comment, which clients skip, so
 * nothing between here and the client (a mesh stream's read deadline, a proxy, the connection's
 * idle timeout should it apply) takes a thinking model for a dead one.
 */
import type { Lease } from "../../pool/pool.ts";
import { serverGone } from "../../pool/errors.ts";
import { figuresOf, toStats, type RequestStats } from "../../metrics/request-stats.ts";
import { guardSse } from "../http/sse-guard.ts";
import { figuresOfSseTail, SSE_TAIL_BYTES, TailKeeper } from "./passing-stats.ts";
import { tapStream } from "../http/stream-tap.ts";
import { wholeBody } from "./outstanding.ts";

/** Silence after which a stream gets a keep-alive comment: well under --idle-timeout's default and a peer's read deadline. */
export const KEEP_ALIVE_MS = 15_000;
const encoder = new TextEncoder();
const KEEP_ALIVE = encoder.encode(": keep-alive\n\n");
const decoder = new TextDecoder();

export interface ProxyInput {
  lease: Lease;
  model: string;
  path: string;
  body: ArrayBuffer;
  clientSignal: AbortSignal;
  /** Added to the response (which node answered). */
  extraHeaders?: Record<string, string>;
  /**
   * Receives the request's figures once the answer is complete, worked out only if someone asks (off
   * the hot path); for a stream, also when its first bytes came (performance.now()).
   */
  onStats: (stats: () => RequestStats, stream: { firstByteAt: number | undefined } | undefined) => void;
  /** Silence before a keep-alive comment (KEEP_ALIVE_MS; tests shorten it). */
  keepAliveMs?: number;
  /**
   * Done before the request gives its slot back, however it ends (answered, failed, cancelled): a
   * member's cache restored for it alone is erased here, or the next request could be given the
   * slot, and llama-server would read its prompt from that cache.
   */
  beforeRelease?: () => Promise<void>;
  /** The server's fence this request holds (`WrappedServer.fence`): it alone passes it. */
  ownFence?: Promise<void> | undefined;
}

/** Response headers that describe the upstream connection, not the content. */
const HOP_BY_HOP = new Set(["connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "date", "server"]);

function passHeaders(from: Headers): Headers {
  const out = new Headers();
  from.forEach((value, key) => {
    if (!HOP_BY_HOP.has(key)) out.set(key, value);
  });
  return out;
}

export async function proxyToServer(input: ProxyInput): Promise<Response> {
  const { lease, model, path } = input;
  const started = performance.now();
  // The upstream request ends when the client goes, the server dies, the slot is taken back, or
  // the client cancels the stream. Linked by hand, and unlinked once the answer is done:
  // `AbortSignal.any` joined to the server's long-lived `gone` cost the router more per request.
  const upstreamAbort = new AbortController();
  const signal = upstreamAbort.signal;
  const unlink = linkAborts(upstreamAbort, lease.revoked ? [input.clientSignal, lease.server.gone, lease.revoked] : [input.clientSignal, lease.server.gone]);
  const before = input.beforeRelease;
  const release = before
    ? () => {
        unlink();
        void before().finally(() => lease.release());
      }
    : () => {
        unlink();
        lease.release();
      };
  const send = (keepalive: boolean) => fetch(`${lease.server.url}${path}`, { method: "POST", headers: { ...lease.server.headers, "content-type": "application/json" }, body: input.body, signal, keepalive });
  let upstream: Response;
  try {
    // Another request's cache of a member's may be in one of its slots (`kv/kv-follow.ts`): held off until it is erased.
    await lease.server.pastFence(input.ownFence, signal);
    // llama-server (cpp-httplib) closes kept-alive connections on its own schedule, and a request
    // sent on one it has just closed is reset unread (~1% under load, found by bench/soak.ts): once
    // more on a fresh connection. A server that really died refuses that one too.
    upstream = await send(true).catch((err: unknown) => {
      if ((err as { code?: string }).code !== "ECONNRESET" || signal.aborted) throw err;
      return send(false);
    });
  } catch (err) {
    release();
    if (input.clientSignal.aborted) throw err;
    // Sent ahead of its slot and displaced by a fairer share of the queue: the client gets that refusal.
    if (lease.revoked?.aborted) throw lease.revoked.reason;
    // Refused or reset before the exit is noticed is the same failure: the server is gone.
    throw serverGone(`the server for model "${model}" failed while handling the request (${(err as Error).message}); retry to reload it`);
  }

  lease.begun?.();
  const headers = passHeaders(upstream.headers);
  const extra = input.extraHeaders;
  if (extra) for (const k in extra) headers.set(k, extra[k]!);
  const isSse = (upstream.headers.get("content-type") ?? "").includes("text/event-stream");
  if (!isSse || !upstream.body) {
    let buf: ArrayBuffer;
    try {
      buf = await upstream.arrayBuffer();
    } catch (err) {
      if (input.clientSignal.aborted) throw err;
      throw serverGone(`the server for model "${model}" failed while answering (${(err as Error).message}); retry to reload it`);
    } finally {
      release();
    }
    const totalMs = performance.now() - started;
    if (upstream.status === 200) input.onStats(() => toStats(model, path, figuresOf(parseJson(buf)), { firstByteMs: undefined, totalMs }), undefined);
    return wholeBody(new Response(buf, { status: upstream.status, headers }));
  }

  const tail = new TailKeeper(SSE_TAIL_BYTES);
  let firstByteMs: number | undefined;
  let finished = false;
  const finish = () => {
    if (finished) return;
    finished = true;
    release();
    const totalMs = performance.now() - started;
    try {
      input.onStats(() => toStats(model, path, figuresOfSseTail(tail), { firstByteMs, totalMs }), {
        firstByteAt: firstByteMs === undefined ? undefined : started + firstByteMs,
      });
    } catch {
      // Figures are a by-product: failing to record them must not fail an answer already given.
    }
  };
  // One tap (`stream-tap.ts`) for the proxy's hooks and the guard's after them: a failed upstream
  // read reaches the guard as a failed end, which it ends in its dialect's words.
  const stream = tapStream(upstream.body, {
    onChunk: (chunk) => {
      firstByteMs ??= performance.now() - started;
      tail.push(chunk);
      return undefined;
    },
    // A server killed mid-answer closes the socket like a finished one: the guard tells them apart.
    onEnd: finish,
    onCancel: () => {
      upstreamAbort.abort();
      finish();
    },
    // Only between events: a comment inside a half-sent event would corrupt it.
    onStall: { side: "source", ms: input.keepAliveMs ?? KEEP_ALIVE_MS, call: () => (finished || !atEventBoundary(tail.last(4)) ? undefined : KEEP_ALIVE) },
  });
  const gone = { message: `the server for model "${model}" exited mid-stream; retry to reload it`, code: "model_server_exited" };
  return new Response(guardSse(stream, path, gone), { status: upstream.status, headers });
}

/** Aborts `target` when any of `sources` aborts (at once if one has); the function returned unlinks it. */
function linkAborts(target: AbortController, sources: readonly AbortSignal[]): () => void {
  const onAbort = (event: Event) => target.abort((event.target as AbortSignal).reason);
  for (const source of sources) {
    if (source.aborted) target.abort(source.reason);
    else source.addEventListener("abort", onAbort, { once: true });
  }
  return () => {
    for (const source of sources) source.removeEventListener("abort", onAbort);
  };
}

function parseJson(buf: ArrayBuffer): unknown {
  try {
    return JSON.parse(decoder.decode(buf));
  } catch {
    return undefined;
  }
}

/** Whether the bytes so far end with a whole event (or there are none yet). */
export function atEventBoundary(tail: Uint8Array): boolean {
  if (tail.length === 0) return true;
  const end = decoder.decode(tail.subarray(Math.max(0, tail.length - 4)));
  return end.endsWith("\n\n") || end.endsWith("\r\n\r\n");
}
