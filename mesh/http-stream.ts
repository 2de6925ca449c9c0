/**
 * An HTTP exchange over one mesh stream, so any node's API can answer for a model another node
 * hosts: the request head (method, path, headers) as one control frame, then the body until the
 * stream's send side finishes; the response head as one frame, then the body, passed on as it
 * arrives (SSE event by event). Only admitted peers can open such a stream, and they reach only
 * the routes `member-routes.ts` opens to members; every read from the peer and every write to it
 * has a deadline, and a node serves only so many members' requests at once (`MemberStreamCap`).
 */
import { z } from "zod";
import { hidePathsInJson } from "./member-text.ts";
import { MAX_MEMBER_PATH, MEMBER_URL_BASE, type MemberVerdict } from "./member-routes.ts";
import type { Admission } from "./member-stream-cap.ts";
import { TimedRecv, TimedSend } from "../streams/read-deadline.ts";
import type { RecvSide, SendSide, Stream } from "./transport.ts";
import { encodeFrame, readFrame } from "../streams/wire.ts";
import { FORWARDED_HEADER } from "./mesh-headers.ts";

const READ_BUFFER = 64 * 1024;

/** A peer's request head must arrive whole within this, and its body must not pause longer. */
export const REQUEST_HEAD_MS = 30_000;
export const REQUEST_IDLE_MS = 30_000;
/** Head and body together, however steadily they drip: a body is buffered whole, so its read must end. */
export const REQUEST_TOTAL_MS = 60_000;
/**
 * A peer that takes no byte of an answer for this long (its flow-control window full) is not
 * reading it: the answer holds a llama-server slot and a pool lease, so it is dropped.
 */
export const RESPONSE_WRITE_STALL_MS = 60_000;
/**
 * A request body goes out in pieces of this size, each under the idle deadline: a stall is caught
 * as one, without a large body needing a fast link.
 */
const WRITE_PIECE = 1 << 20;
/** Once the answer has begun, no byte of it for this long means the serving node is stuck. */
export const RESPONSE_IDLE_MS = 5 * 60_000;

const MAX_HEADERS = 64;
const MAX_HEADER_VALUE = 8 * 1024;
const METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"] as const;
/** What a peer's request head may hold: a plain origin-form path, a standard method, few and short headers. */
const RequestHead = z.object({
  method: z.enum(METHODS),
  path: z.string().min(1).max(MAX_MEMBER_PATH).startsWith("/"),
  headers: z
    .record(z.string().regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$/), z.string().max(MAX_HEADER_VALUE))
    .refine((h) => Object.keys(h).length <= MAX_HEADERS, `at most ${MAX_HEADERS} headers`)
    .default({}),
});
/** Headers about the hop, not the request: the serving side makes its own. */
const NOT_FORWARDED = new Set(["host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te", "trailer", "expect"]);

interface Head {
  method?: string;
  path?: string;
  status?: number;
  headers?: Record<string, string>;
}

/** The member's streams hold as many request bytes as this node lets one member (or all) hold. */
class OverBudget extends Error {}

/** The whole body, each piece counted by `hold` (the member's budget across its streams) as it comes. */
async function readAll(recv: RecvSide, limit: number, hold: (bytes: number) => boolean): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let total = 0;
  const buf = new Uint8Array(READ_BUFFER);
  for (;;) {
    const n = await recv.read(buf);
    if (n === null) break;
    total += n;
    if (total > limit) throw new Error(`forwarded body over ${limit} bytes`);
    if (!hold(n)) throw new OverBudget("this node holds as many request bytes from mesh members as it takes at once; retry shortly");
    parts.push(buf.slice(0, n));
  }
  return Buffer.concat(parts);
}

/** The answer's body; a read that fails (the peer gone, its deadline passed) fails it: the router ends the stream in its client's dialect. */
function bodyStream(stream: Stream, onDone: () => void): ReadableStream<Uint8Array> {
  const buf = new Uint8Array(READ_BUFFER);
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        try {
          const n = await stream.recv.read(buf);
          if (n === null) {
            onDone();
            return controller.close();
          }
          controller.enqueue(buf.slice(0, n));
        } catch (err) {
          onDone();
          controller.error(err);
        }
      },
      async cancel() {
        onDone();
        await stream.recv.stop(0).catch(() => undefined);
        await stream.send.reset(0).catch(() => undefined);
      },
    },
    { highWaterMark: 0 },
  );
}

export interface ForwardDeadlines {
  /**
   * For the response head: the serving node may first wait for its model's slot and load it, and
   * sends a non-streamed answer's head only with the whole answer.
   */
  headMs: number;
  /** Between bytes of the body once it has begun, and for each piece of the request the serving node must take in. */
  idleMs: number;
}

/** `p`, or a rejection as soon as `signal` aborts: a call stuck in the binding cannot be cancelled, only left. */
function orAbort<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason instanceof Error ? signal.reason : new Error("the request was aborted"));
    if (signal.aborted) {
      // Left at once, the call still fails later (its stream is reset): that failure is nobody's to hear.
      p.catch(() => undefined);
      return onAbort();
    }
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (err: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(err);
      },
    );
  });
}

/** Sends a request over `stream` and resolves with the peer's response (its body still streaming). */
export async function forwardHttp(
  stream: Stream,
  req: { method: string; path: string; headers: Record<string, string>; body: Uint8Array },
  signal: AbortSignal,
  deadlines: ForwardDeadlines,
): Promise<Response> {
  const peer = "the node serving this model";
  const send = new TimedSend(stream.send, deadlines.idleMs, peer);
  const recv = new TimedRecv(stream.recv, deadlines.idleMs, peer);
  const giveUp = () => {
    signal.removeEventListener("abort", giveUp);
    void send.reset(0).catch(() => undefined);
    void recv.stop(0).catch(() => undefined);
  };
  signal.addEventListener("abort", giveUp, { once: true });
  const exchange = async (): Promise<Head | null> => {
    // Head and body in as few writes as may be: each write through the binding costs about 0.1 ms.
    const requestHead = encodeFrame({ method: req.method, path: req.path, headers: { ...req.headers, [FORWARDED_HEADER]: "1" } });
    const whole = Buffer.concat([requestHead, req.body]);
    for (let off = 0; off < whole.length; off += WRITE_PIECE) await send.writeAll(whole.subarray(off, off + WRITE_PIECE));
    await send.finish();
    return (await recv.within(deadlines.headMs, "a response head", () => readFrame(recv))) as Head | null;
  };
  let head: Head | null;
  try {
    head = await orAbort(exchange(), signal);
  } catch (err) {
    giveUp();
    throw err;
  }
  if (!head || typeof head.status !== "number") {
    giveUp();
    throw new Error(`${peer} sent no response head`);
  }
  return new Response(bodyStream({ send, recv }, () => signal.removeEventListener("abort", giveUp)), { status: head.status, headers: head.headers ?? {} });
}

export interface ServeOptions {
  maxBodyBytes: number;
  /** Whether a peer may send this request at all (`memberMayRequest`): refused ones never reach the handler. */
  allow: (method: string, path: string) => MemberVerdict;
  /** A place among the streams served at once (`MemberStreamCap.take`); none given, no cap. */
  admit?: () => Admission;
  /** The request head must arrive whole within this (REQUEST_HEAD_MS). */
  headMs?: number;
  /** The body must not pause longer than this (REQUEST_IDLE_MS). */
  idleMs?: number;
  /** Head and body must arrive whole within this (REQUEST_TOTAL_MS). */
  totalMs?: number;
  /** The peer must take some of the answer within this whenever it is sent some (RESPONSE_WRITE_STALL_MS). */
  writeStallMs?: number;
  /** The sending member's node id: the forwarded marker carries it, so its requests wait their own turn for a slot. */
  from?: string;
}

/** An answer in OpenAI's error shape, as the head and body over the stream. */
function errorAnswer(status: number, headers: Record<string, string>, error: { message: string; type: string; code: string }): Uint8Array {
  return Buffer.concat([encodeFrame({ status, headers: { "content-type": "application/json", ...headers } }), new TextEncoder().encode(JSON.stringify({ error }))]);
}

const forbidden = (message: string) => errorAnswer(403, {}, { message, type: "permission_error", code: "forbidden_for_mesh_members" });
const busy = (message: string) => errorAnswer(503, { "retry-after": "1" }, { message, type: "service_unavailable", code: "too_many_requests" });

/** Sends a short answer and ends the exchange without reading (more of) the request. */
async function answerAndStop(send: SendSide, recv: RecvSide, answer: Uint8Array): Promise<void> {
  try {
    await send.writeAll(answer);
    await send.finish();
  } catch {
    await send.reset(1).catch(() => undefined);
  }
  await recv.stop(0).catch(() => undefined);
}

/** An error answer as a member may read it: files named, not where this node keeps them. */
async function memberAnswer(response: Response): Promise<Response> {
  if (response.status < 400 || !(response.headers.get("content-type") ?? "").includes("json")) return response;
  const headers = new Headers(response.headers);
  headers.delete("content-length");
  return new Response(hidePathsInJson(await response.text()), { status: response.status, headers });
}

type ReadRequest = { refused: string } | { busy: string } | { method: (typeof METHODS)[number]; path: string; headers: Record<string, string>; body: Uint8Array };

/**
 * Answers a request a peer sent over `stream` with `handler` (the node's own API), if `allow`
 * lets a member ask it and `admit` has a place for it. The request is marked as forwarded here,
 * whatever the peer's headers say.
 */
export async function serveHttp(stream: Stream, handler: (req: Request) => Promise<Response>, opts: ServeOptions): Promise<void> {
  // Taken before any read, so streams still sending their heads count too.
  const admission: Admission = opts.admit?.() ?? { ok: true, hold: () => true, bodyDone: () => undefined, release: () => undefined };
  const send = new TimedSend(stream.send, opts.writeStallMs ?? RESPONSE_WRITE_STALL_MS, "the peer");
  const recv = new TimedRecv(stream.recv, opts.idleMs ?? REQUEST_IDLE_MS, "the peer's request");
  if (!admission.ok) return answerAndStop(send, recv, busy(admission.reason));
  let answer: { cancel(): Promise<void> } | undefined;
  try {
    const totalMs = opts.totalMs ?? REQUEST_TOTAL_MS;
    const read = await recv.within(
      totalMs,
      "its whole request",
      async (): Promise<ReadRequest> => {
        const parsed = RequestHead.safeParse(await recv.within(opts.headMs ?? REQUEST_HEAD_MS, "its request head", () => readFrame(recv)));
        if (!parsed.success) throw new Error("bad request head");
        const { method, path, headers } = parsed.data;
        const verdict = opts.allow(method, path);
        if (!verdict.ok) return { refused: `${method} ${path.slice(0, 200)} is not open to mesh members: ${verdict.reason}` };
        try {
          return { method, path, headers, body: await readAll(recv, opts.maxBodyBytes, admission.hold) };
        } catch (err) {
          if (err instanceof OverBudget) return { busy: err.message };
          throw err;
        }
      },
      { idle: true },
    );
    if ("refused" in read) return await answerAndStop(send, recv, forbidden(read.refused));
    if ("busy" in read) return await answerAndStop(send, recv, busy(read.busy));
    const { method, path, body } = read;
    const headers = new Headers();
    for (const [k, v] of Object.entries(read.headers)) if (!NOT_FORWARDED.has(k.toLowerCase())) headers.set(k, v);
    headers.set(FORWARDED_HEADER, opts.from ?? "1");
    const request = new Request(`${MEMBER_URL_BASE}${path}`, {
      method,
      headers,
      ...(method === "GET" || method === "HEAD" ? {} : { body }),
    });
    const handled = await handler(request);
    // The body has gone on to the model: a long answer does not keep it counted against the member.
    admission.bodyDone();
    const response = await memberAnswer(handled);
    const responseHeaders: Record<string, string> = {};
    response.headers.forEach((v, k) => (responseHeaders[k] = v));
    // The head goes out with the first piece of the body (the whole body, for JSON answers).
    let pending: Uint8Array | undefined = encodeFrame({ status: response.status, headers: responseHeaders });
    const reader = response.body?.getReader();
    answer = reader;
    for (;;) {
      const chunk = await reader?.read();
      if (!chunk || chunk.done) break;
      await send.writeAll(pending ? Buffer.concat([pending, chunk.value]) : chunk.value);
      pending = undefined;
    }
    if (pending) await send.writeAll(pending);
    await send.finish();
  } catch {
    // An answer nobody takes: cancelling it ends the generation and gives its pool lease back.
    void answer?.cancel().catch(() => undefined);
    await send.reset(1).catch(() => undefined);
    await recv.stop(1).catch(() => undefined);
  } finally {
    admission.release();
  }
}
