/**
 * The console: the page at `/` with its script and stylesheet (static: nothing of the node's state
 * or secrets is in them), and what the page reads, under `/api/console` where the API keys and the
 * browser guard hold like on every management route: the state, and one event stream per page.
 */
import { Hono } from "hono";
import { consoleAssets, type ConsoleAssets } from "../../console/bundle.ts";
import type { ConsoleEvents } from "../../console/protocol.ts";
import { MAX_CONSOLE_PAGES, type ConsoleFeed } from "./console-feed.ts";
import { errorResponse } from "../http/errors.ts";

/** The page runs only its own files, talks only to its node, and no other page may frame it (its buttons load and unload). */
const PAGE_HEADERS = {
  "Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "no-referrer",
  "Cache-Control": "no-cache",
};

/** Unread bytes a page may leave queued before its stream is cut (a page reads them at once; one that stops is let go). */
export const MAX_UNREAD_BYTES = 4 * 1024 * 1024;

const encoder = new TextEncoder();
const frame = (event: string, data: unknown) => encoder.encode(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);

/** One page's event stream: a `hello` with everything, then each event as it comes, with keep-alive comments in the silences. */
export function consoleEventStream(feed: ConsoleFeed, keepAliveMs: number, signal: AbortSignal): ReadableStream<Uint8Array> {
  let stop = () => {};
  return new ReadableStream<Uint8Array>(
    {
      async start(controller) {
        let quietSince = Date.now();
        let closed = false;
        const push = (bytes: Uint8Array) => {
          if (closed) return;
          if ((controller.desiredSize ?? 0) <= 0) return stop();
          controller.enqueue(bytes);
          quietSince = Date.now();
        };
        const send = <K extends keyof ConsoleEvents>(event: K, data: ConsoleEvents[K]) => push(frame(event, data));
        const keepAlive = setInterval(() => Date.now() - quietSince >= keepAliveMs && push(encoder.encode(": keep-alive\n\n")), Math.max(250, keepAliveMs / 2));
        let unsubscribe = () => {};
        stop = () => {
          if (closed) return;
          closed = true;
          clearInterval(keepAlive);
          unsubscribe();
          signal.removeEventListener("abort", stop);
          try {
            // An error, not a close: a close would keep what is queued until the socket goes.
            controller.error(new Error("the console stream ended"));
          } catch {
            // already closed or cancelled
          }
        };
        signal.addEventListener("abort", stop);
        // The hello first, then every event after it, in order.
        send("hello", await feed.hello());
        if (!closed) unsubscribe = feed.subscribe(send);
      },
      cancel() {
        stop();
      },
    },
    { highWaterMark: MAX_UNREAD_BYTES, size: (chunk) => chunk?.byteLength ?? 0 },
  );
}

export function consoleRoutes(feed: ConsoleFeed | undefined, keepAliveMs: number, assets: () => Promise<ConsoleAssets> = consoleAssets): Hono {
  const app = new Hono();
  const file = (pick: (a: ConsoleAssets) => string, type: string) => async (c: { body: (b: string, s: 200, h: Record<string, string>) => Response }) =>
    c.body(pick(await assets()), 200, { ...PAGE_HEADERS, "Content-Type": type });
  app.get("/", file((a) => a.html, "text/html; charset=utf-8"));
  app.get("/console/app.js", file((a) => a.js, "text/javascript; charset=utf-8"));
  app.get("/console/app.css", file((a) => a.css, "text/css; charset=utf-8"));
  const noFeed = (c: Parameters<typeof errorResponse>[0]) => errorResponse(c, 503, "this node serves no console state (it runs without a mesh node)", "service_unavailable", "console_unavailable");
  app.get("/api/console/state", async (c) => (feed ? c.json(await feed.state()) : noFeed(c)));
  app.get("/api/console/events", (c) => {
    if (!feed) return noFeed(c);
    if (feed.full) return errorResponse(c, 429, `${MAX_CONSOLE_PAGES} console pages are open on this node, its limit; close one`, "rate_limit_error", "too_many_console_pages", 5);
    return new Response(consoleEventStream(feed, keepAliveMs, c.req.raw.signal), {
      headers: { "Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache", "X-Accel-Buffering": "no" },
    });
  });
  return app;
}
