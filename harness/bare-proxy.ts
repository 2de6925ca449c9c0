#!/usr/bin/env bun
/**
 * The least an HTTP proxy in Bun can be: `Bun.serve` handing each request to `fetch` against one
 * upstream, its answer streamed through untouched. The body is read first so that a request sent on
 * a kept-alive connection llama-server just closed can go once more on a fresh one (any proxy in
 * front of llama-server needs that, the node's too). `bench/router-overhead.ts` runs it
 * beside the node to measure the floor of a router's CPU per request on the machine at hand.
 *
 *   bun harness/bare-proxy.ts <upstream origin>     (prints its own origin on stdout, then serves)
 */
const upstream = process.argv[2];
if (!upstream || !/^http:\/\/127\.0\.0\.1:\d+$/.test(upstream)) throw new Error("usage: bare-proxy.ts http://127.0.0.1:PORT");

const server = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(req) {
    const url = new URL(req.url);
    const body = await req.arrayBuffer();
    const send = (keepalive: boolean) => fetch(upstream + url.pathname + url.search, { method: req.method, headers: req.headers, body, keepalive });
    return send(true).catch((err: unknown) => {
      if ((err as { code?: string }).code !== "ECONNRESET") throw err;
      return send(false);
    });
  },
});
console.log(`http://127.0.0.1:${server.port}`);
