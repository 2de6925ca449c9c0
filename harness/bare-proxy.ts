#!/usr/bin/env bun
/**
 * The least an HTTP proxy in Bun can be: `Bun.serve` handing each request to `fetch` against one
 * upstream, its answer streamed through untouched. The body is read first so that a request sent on
 * a kept-alive connection llama-server just closed can go once more on a fresh one (any proxy in
 * front of llama-server needs that, the node's too). `bench/router-overhead.ts` runs it
 * beside the node to measure the floor of a router's CPU per request on the machine at hand.
 *
 * `--duties`: the same proxy doing, with nothing else, what any router of ours must do for each
 * request, each the cheapest way Bun offers: a Hono app whose six middlewares pass the request on
 * (the node's are metrics, the browser guard, API keys, the body limit, the body read, the error
 * shape), the upstream request aborted with the client or a long-lived signal (a server that
 * died), a whole answer read before it is passed on (the slot is held until then, and its figures
 * are in it) with its hop-by-hop headers dropped, and a stream passed through one JS read loop
 * (what any look at its events takes). What the node costs above this is its own rules' price.
 *
 *   bun harness/bare-proxy.ts <upstream origin> [--duties]   (prints its own origin on stdout, then serves)
 */
import { Hono } from "hono";

const upstream = process.argv[2];
if (!upstream || !/^http:\/\/127\.0\.0\.1:\d+$/.test(upstream)) throw new Error("usage: bare-proxy.ts http://127.0.0.1:PORT [--duties]");
const duties = process.argv[3] === "--duties";

const bare = async (req: Request): Promise<Response> => {
  const url = new URL(req.url);
  const body = await req.arrayBuffer();
  const send = (keepalive: boolean) => fetch(upstream + url.pathname + url.search, { method: req.method, headers: req.headers, body, keepalive });
  return send(true).catch((err: unknown) => {
    if ((err as { code?: string }).code !== "ECONNRESET") throw err;
    return send(false);
  });
};

const HOP_BY_HOP = new Set(["connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "date", "server"]);
const serverGone = new AbortController();

async function withDuties(req: Request, body: ArrayBuffer): Promise<Response> {
  const abort = new AbortController();
  const onAbort = (event: Event) => abort.abort((event.target as AbortSignal).reason);
  const sources = [req.signal, serverGone.signal];
  for (const s of sources) s.addEventListener("abort", onAbort, { once: true });
  const unlink = () => sources.forEach((s) => s.removeEventListener("abort", onAbort));
  const headers = { authorization: req.headers.get("authorization") ?? "", "content-type": "application/json" };
  const send = (keepalive: boolean) => fetch(upstream + new URL(req.url).pathname, { method: "POST", headers, body, signal: abort.signal, keepalive });
  const res = await send(true).catch((err: unknown) => {
    if ((err as { code?: string }).code !== "ECONNRESET") throw err;
    return send(false);
  });
  const out = new Headers();
  res.headers.forEach((value, key) => void (HOP_BY_HOP.has(key) || out.set(key, value)));
  if (!res.body || !(res.headers.get("content-type") ?? "").includes("text/event-stream")) {
    const whole = await res.arrayBuffer().finally(unlink);
    return new Response(whole, { status: res.status, headers: out });
  }
  const reader = res.body.getReader();
  const stream = new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        const step = await reader.read();
        if (!step.done) return controller.enqueue(step.value);
        unlink();
        controller.close();
      },
      cancel: (reason) => void reader.cancel(reason).finally(unlink),
    },
    { highWaterMark: 0 },
  );
  return new Response(stream, { status: res.status, headers: out });
}

let handler: (req: Request) => Response | Promise<Response> = bare;
if (duties) {
  const app = new Hono();
  for (let i = 0; i < 6; i++) app.use("*", async (_, next) => void (await next()));
  app.post("*", async (c) => withDuties(c.req.raw, await c.req.arrayBuffer()));
  handler = (req) => app.fetch(req);
}

const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: handler });
console.log(`http://127.0.0.1:${server.port}`);
