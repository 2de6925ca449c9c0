/**
 * An HTTP exchange over one mesh stream, so any node's API can answer for a model another node
 * hosts: the request head (method, path, headers) as one control frame, then the body until the
 * stream's send side finishes; the response head as one frame, then the body, passed on as it
 * arrives (SSE event by event). Only admitted peers can open such a stream.
 */
import type { Stream } from "./transport.ts";
import { encodeFrame, readFrame } from "./wire.ts";

/** Marks a request that already crossed the mesh: it is answered where it lands, never forwarded again. */
export const FORWARDED_HEADER = "x-mesh-forwarded";
const READ_BUFFER = 64 * 1024;

interface Head {
  method?: string;
  path?: string;
  status?: number;
  headers?: Record<string, string>;
}

async function readAll(stream: Stream, limit: number): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let total = 0;
  const buf = new Uint8Array(READ_BUFFER);
  for (;;) {
    const n = await stream.recv.read(buf);
    if (n === null) break;
    total += n;
    if (total > limit) throw new Error(`forwarded body over ${limit} bytes`);
    parts.push(buf.slice(0, n));
  }
  return Buffer.concat(parts);
}

/** What an SSE client sees when the node answering it vanishes mid-stream. */
const SSE_GONE = new TextEncoder().encode(
  `data: ${JSON.stringify({ error: { message: "the node serving this model went away mid-stream; retry", type: "service_unavailable", code: "peer_gone" } })}\n\n`,
);

function bodyStream(stream: Stream, sse: boolean, onDone: () => void): ReadableStream<Uint8Array> {
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
          if (!sse) return controller.error(err);
          controller.enqueue(SSE_GONE);
          controller.close();
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

/** Sends a request over `stream` and resolves with the peer's response (its body still streaming). */
export async function forwardHttp(
  stream: Stream,
  req: { method: string; path: string; headers: Record<string, string>; body: Uint8Array },
  signal: AbortSignal,
): Promise<Response> {
  const abort = () => {
    void stream.send.reset(0).catch(() => undefined);
    void stream.recv.stop(0).catch(() => undefined);
  };
  signal.addEventListener("abort", abort, { once: true });
  // Head and body in one write: each write through the binding costs about 0.1 ms.
  const requestHead = encodeFrame({ method: req.method, path: req.path, headers: { ...req.headers, [FORWARDED_HEADER]: "1" } });
  await stream.send.writeAll(Buffer.concat([requestHead, req.body]));
  await stream.send.finish();
  const head = (await readFrame(stream.recv)) as Head | null;
  if (!head || typeof head.status !== "number") throw new Error("the peer sent no response head");
  const sse = (head.headers?.["content-type"] ?? "").includes("text/event-stream");
  return new Response(bodyStream(stream, sse, () => signal.removeEventListener("abort", abort)), { status: head.status, headers: head.headers ?? {} });
}

/** Answers a request a peer sent over `stream` with `handler` (the node's own API). */
export async function serveHttp(stream: Stream, handler: (req: Request) => Promise<Response>, maxBodyBytes: number): Promise<void> {
  try {
    const head = (await readFrame(stream.recv)) as Head | null;
    if (!head || typeof head.method !== "string" || typeof head.path !== "string" || !head.path.startsWith("/")) throw new Error("bad request head");
    const body = await readAll(stream, maxBodyBytes);
    const request = new Request(`http://mesh.local${head.path}`, {
      method: head.method,
      headers: head.headers ?? {},
      ...(head.method === "GET" || head.method === "HEAD" ? {} : { body }),
    });
    const response = await handler(request);
    const headers: Record<string, string> = {};
    response.headers.forEach((v, k) => (headers[k] = v));
    // The head goes out with the first piece of the body (the whole body, for JSON answers).
    let pending: Uint8Array | undefined = encodeFrame({ status: response.status, headers });
    if (response.body) {
      for await (const chunk of response.body) {
        await stream.send.writeAll(pending ? Buffer.concat([pending, chunk]) : chunk);
        pending = undefined;
      }
    }
    if (pending) await stream.send.writeAll(pending);
    await stream.send.finish();
  } catch {
    await stream.send.reset(1).catch(() => undefined);
    await stream.recv.stop(1).catch(() => undefined);
  }
}
