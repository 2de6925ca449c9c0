/** The front door with a stand-in for Bun's server: the cap on requests in flight, and when the idle timeout is lifted and put back. */
import { expect, test } from "bun:test";
import { Hono } from "hono";
import type { AppEnv } from "../../router/app.ts";
import { crashed, frontDoor, keepAliveMsFor, watchReader, type ServerControls } from "../../router/front-door.ts";
import { waitFor } from "../../harness/wait.ts";
import { FORWARDED_HEADER } from "../../mesh/mesh-headers.ts";

function server(pending: number): ServerControls & { timeouts: number[] } {
  const timeouts: number[] = [];
  return { pendingRequests: pending, timeouts, timeout: (_req, seconds) => void timeouts.push(seconds) };
}

function app(): Hono<AppEnv> {
  const a = new Hono<AppEnv>();
  a.get("/health", (c) => c.json({ status: "ok" }));
  a.post("/json", async (c) => {
    await c.req.text();
    c.env.connection?.bodyRead();
    return c.json({ forwarded: c.req.header(FORWARDED_HEADER) ?? null });
  });
  a.post("/sse", (c) => {
    c.env.connection?.bodyRead();
    return new Response("data: 1\n\ndata: [DONE]\n\n", { headers: { "content-type": "text/event-stream" } });
  });
  return a;
}

/** A request as Bun hands it over from a socket: with its Host header. */
const get = (path: string) => new Request(`http://127.0.0.1${path}`, { headers: { host: "127.0.0.1" } });

test("beyond --max-connections: 503 in OpenAI's shape with Retry-After; at the cap it still answers", async () => {
  const door = frontDoor(app(), { maxConnections: 4, idleTimeoutS: 30 });
  const over = await door(get("/health"), server(5));
  expect(over.status).toBe(503);
  expect(over.headers.get("retry-after")).toBe("1");
  expect(await over.json()).toMatchObject({ error: { type: "service_unavailable", code: "too_many_connections", message: expect.stringContaining("--max-connections") } });
  expect((await door(get("/health"), server(4))).status).toBe(200);
});

test("the cap counts the node's other listener too (--ollama-listen): one number for both", async () => {
  let elsewhere = 3;
  const door = frontDoor(app(), { maxConnections: 4, idleTimeoutS: 30, elsewhere: () => elsewhere });
  expect((await door(get("/health"), server(2))).status).toBe(503);
  elsewhere = 2;
  expect((await door(get("/health"), server(2))).status).toBe(200);
});

test("no Host (HTTP/1.0): 421 before anything reads the request", async () => {
  const res = await frontDoor(app(), { maxConnections: 4, idleTimeoutS: 30 })(new Request("http://127.0.0.1/health", { headers: { [FORWARDED_HEADER]: "1" } }), server(1));
  expect(res.status).toBe(421);
  expect(await res.json()).toMatchObject({ error: { code: "misdirected_request" } });
});

test("a request that never says its body is read keeps the idle timeout", async () => {
  const s = server(1);
  await frontDoor(app(), { maxConnections: 4, idleTimeoutS: 30 })(get("/health"), s);
  expect(s.timeouts).toEqual([]);
});

test("read whole: the timeout is lifted while the handler works and back once a JSON answer goes out", async () => {
  const s = server(1);
  const req = new Request("http://127.0.0.1/json", { method: "POST", body: "{}", headers: { host: "127.0.0.1", [FORWARDED_HEADER]: "1" } });
  const res = await frontDoor(app(), { maxConnections: 4, idleTimeoutS: 7 })(req, s);
  expect(s.timeouts).toEqual([0, 7]);
  // The marker only the mesh may set is gone before the app sees the request.
  expect(await res.json()).toEqual({ forwarded: null });
});

test("a streamed answer keeps the timeout lifted to its end: Bun counts the answer's own bytes as idleness", async () => {
  const s = server(1);
  const res = await frontDoor(app(), { maxConnections: 4, idleTimeoutS: 7 })(new Request("http://127.0.0.1/sse", { method: "POST", headers: { host: "127.0.0.1" } }), s);
  expect(s.timeouts).toEqual([0]);
  expect(await res.text()).toBe("data: 1\n\ndata: [DONE]\n\n");
  expect(s.timeouts).toEqual([0, 7]);
});

test("a client that stops reading a streamed answer is cut after the stall time: the producer is cancelled, the timeout put back", async () => {
  let cancelled: unknown;
  let ended = 0;
  const source = new ReadableStream<Uint8Array>({
    pull: (c) => c.enqueue(new TextEncoder().encode("data: x\n\n")),
    cancel: (reason) => void (cancelled = reason),
  });
  const reader = watchReader(source, 50, () => ended++).getReader();
  expect((await reader.read()).done).toBe(false);
  await waitFor(() => cancelled !== undefined, { what: "the producer to be cancelled", timeoutMs: 5_000 });
  expect(String(cancelled)).toContain("stopped reading");
  expect(ended).toBe(1);
  await expect(reader.read()).rejects.toThrow("read nothing for 50 ms");
});

test("a reader that keeps reading is never cut, and the end is told once", async () => {
  let n = 0;
  let ended = 0;
  const source = new ReadableStream<Uint8Array>({ pull: (c) => (++n > 5 ? c.close() : c.enqueue(new Uint8Array([n]))) });
  const text = await new Response(watchReader(source, 10_000, () => ended++)).bytes();
  expect([...text]).toEqual([1, 2, 3, 4, 5]);
  expect(ended).toBe(1);
});

test("through a real Bun.serve with a 2 s idle timeout, a stream writing for 5 s ends whole (it was reset at 4 s)", async () => {
  const a = new Hono<AppEnv>();
  a.post("/stream", (c) => {
    c.env.connection?.bodyRead();
    let n = 0;
    const body = new ReadableStream<Uint8Array>({
      async pull(ctl) {
        await Bun.sleep(100);
        if (++n > 50) return ctl.close();
        ctl.enqueue(new TextEncoder().encode(`data: ${n}\n\n`));
      },
    });
    return new Response(body, { headers: { "content-type": "text/event-stream" } });
  });
  const door = frontDoor(a, { maxConnections: 4, idleTimeoutS: 2 });
  const bun = Bun.serve({ port: 0, hostname: "127.0.0.1", idleTimeout: 2, fetch: (req, srv) => door(req, srv) });
  try {
    const text = await (await fetch(`http://127.0.0.1:${bun.port}/stream`, { method: "POST" })).text();
    expect(text.trim().split("\n\n").at(-1)).toBe("data: 50");
  } finally {
    await bun.stop(true);
  }
}, 20_000);

test.each([
  [30, 15_000],
  [255, 15_000],
  [10, 5_000],
  [1, 500],
])("keep-alives for --idle-timeout %ps every %p ms", (idle, ms) => expect(keepAliveMsFor(idle)).toBe(ms));

test("a crash outside the app is answered in OpenAI's shape, without a stack or source", async () => {
  const res = crashed(new TypeError("Invalid URL\n    at fetch (/work/main/main.ts:70:15)"));
  expect(res.status).toBe(500);
  const text = await res.text();
  expect(JSON.parse(text)).toEqual({ error: { message: "the node failed to handle the request: Invalid URL", type: "server_error", code: null } });
  expect(text).not.toContain("main.ts");
});
