/**
 * Forwards one OpenAI request to the llama-server that serves its model and passes the answer back:
 * JSON whole, SSE unbuffered event by event. The request holds its server (no eviction) until the
 * answer is complete or the client goes away; a client that disconnects aborts the upstream
 * request; a server that dies mid-answer ends the stream with an error event instead of a hang.
 */
import type { Lease } from "../pool/pool.ts";
import { serverGone } from "../pool/errors.ts";
import { figuresOf, figuresOfSse, toStats, type RequestStats } from "./request-stats.ts";

const SSE_TAIL_BYTES = 16 * 1024;
const encoder = new TextEncoder();
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
  const upstreamAbort = new AbortController();
  const signal = AbortSignal.any([input.clientSignal, lease.server.gone, upstreamAbort.signal]);
  let upstream: Response;
  try {
    upstream = await fetch(`${lease.server.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: input.body,
      signal,
    });
  } catch (err) {
    lease.release();
    if (input.clientSignal.aborted) throw err;
    // Refused or reset before the exit is noticed is the same failure: the server is gone.
    throw serverGone(`the server for model "${model}" failed while handling the request (${(err as Error).message}); retry to reload it`);
  }

  const headers = passHeaders(upstream.headers);
  for (const [k, v] of Object.entries(input.extraHeaders ?? {})) headers.set(k, v);
  const isSse = (upstream.headers.get("content-type") ?? "").includes("text/event-stream");
  if (!isSse || !upstream.body) {
    let buf: ArrayBuffer;
    try {
      buf = await upstream.arrayBuffer();
    } catch (err) {
      if (input.clientSignal.aborted) throw err;
      throw serverGone(`the server for model "${model}" failed while answering (${(err as Error).message}); retry to reload it`);
    } finally {
      lease.release();
    }
    const totalMs = performance.now() - started;
    if (upstream.status === 200) input.onStats(() => toStats(model, path, figuresOf(parseJson(buf)), { firstByteMs: undefined, totalMs }), undefined);
    return new Response(buf, { status: upstream.status, headers });
  }

  const reader = upstream.body.getReader();
  let tail = new Uint8Array(0);
  let firstByteMs: number | undefined;
  let finished = false;
  const finish = () => {
    if (finished) return;
    finished = true;
    lease.release();
    const totalMs = performance.now() - started;
    const last = tail;
    input.onStats(() => toStats(model, path, figuresOfSse(decoder.decode(last)), { firstByteMs, totalMs }), {
      firstByteAt: firstByteMs === undefined ? undefined : started + firstByteMs,
    });
  };
  const keepTail = (chunk: Uint8Array) => {
    const joined = new Uint8Array(Math.min(SSE_TAIL_BYTES, tail.length + chunk.length));
    const fromTail = Math.max(0, joined.length - chunk.length);
    joined.set(tail.subarray(tail.length - fromTail), 0);
    joined.set(chunk.subarray(Math.max(0, chunk.length - joined.length)), fromTail);
    tail = joined;
  };
  const stream = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          const { done, value } = await reader.read();
          if (done) {
            // A server killed mid-answer closes the socket like a finished one; only the terminator tells.
            if (!endedCleanly(tail)) controller.enqueue(errorEvent(model));
            finish();
            controller.close();
            return;
          }
          firstByteMs ??= performance.now() - started;
          keepTail(value);
          controller.enqueue(value);
        } catch {
          if (!input.clientSignal.aborted) controller.enqueue(errorEvent(model));
          finish();
          controller.close();
        }
      },
      cancel() {
        upstreamAbort.abort();
        void reader.cancel().catch(() => undefined);
        finish();
      },
    },
    { highWaterMark: 0 },
  );
  return new Response(stream, { status: upstream.status, headers });
}

function parseJson(buf: ArrayBuffer): unknown {
  try {
    return JSON.parse(decoder.decode(buf));
  } catch {
    return undefined;
  }
}

/** The last event of a complete stream: OpenAI's `[DONE]`, or the end event of the Responses and Anthropic APIs. */
export function endedCleanly(tail: Uint8Array): boolean {
  const text = decoder.decode(tail.subarray(Math.max(0, tail.length - 512)));
  return /data: \[DONE\]|event: (response\.completed|message_stop)/.test(text);
}

/** What a client reading the stream sees when the model's server dies mid-answer. */
function errorEvent(model: string): Uint8Array {
  const error = {
    message: `the server for model "${model}" exited mid-stream; retry to reload it`,
    type: "service_unavailable",
    code: "model_server_exited",
  };
  return encoder.encode(`data: ${JSON.stringify({ error })}\n\n`);
}
