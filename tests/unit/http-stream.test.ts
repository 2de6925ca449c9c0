/**
 * HTTP over a mesh stream, on in-memory streams: the serving side refuses what members may not
 * ask before the handler runs, serves only so many members' requests at once, marks what it serves
 * as forwarded, and gives up on a peer that goes quiet, drips, or never reads its answer; the
 * forwarding side gives up on a serving node that never answers or never takes the request.
 */
import { describe, expect, spyOn, test } from "bun:test";
import { forwardHttp, serveHttp, type ServeOptions } from "../../mesh/http-stream.ts";
import { MemberStreamCap } from "../../mesh/member-stream-cap.ts";
import { memberMayRequest } from "../../mesh/member-routes.ts";
import { encodeFrame, readFrame } from "../../streams/wire.ts";
import type { Stream } from "../../mesh/transport.ts";
import { drained, streamPair } from "../../harness/stream-pair.ts";
import { withDeadline } from "../../harness/wait.ts";
import { FORWARDED_HEADER } from "../../mesh/mesh-headers.ts";

const opts: ServeOptions = { maxBodyBytes: 1024, allow: memberMayRequest, headMs: 300, idleMs: 300 };

/** A handler that records what reached it. */
function recording() {
  const seen: Request[] = [];
  const handler = async (req: Request) => {
    seen.push(req);
    return Response.json({ ok: true });
  };
  return { seen, handler };
}

const bounded = <T>(p: Promise<T>) => withDeadline(p, 10_000, "serveHttp to return");

/**
 * `stream` with QUIC's flow control at a window of nothing: a write completes only once the other
 * end has read it, so a peer that never reads blocks the writer for good.
 */
function windowless(stream: Stream): Stream {
  const inner = stream.send;
  return {
    recv: stream.recv,
    send: {
      writeAll: async (bytes) => {
        await inner.writeAll(bytes);
        await drained(inner);
      },
      finish: () => inner.finish(),
      reset: (code) => inner.reset(code),
    },
  };
}

/** `stream` whose reads are counted, to show what was never read. */
function counted(stream: Stream): { stream: Stream; reads: () => number } {
  let reads = 0;
  const recv = stream.recv;
  return {
    stream: {
      send: stream.send,
      recv: {
        read: (buf) => (reads++, recv.read(buf)),
        readExact: (buf) => (reads++, recv.readExact(buf)),
        stop: (code) => recv.stop(code),
      },
    },
    reads: () => reads,
  };
}

describe("MemberStreamCap", () => {
  test("admits up to its cap, one member up to half of it; a place given back twice counts once", () => {
    const cap = new MemberStreamCap(4);
    const a1 = cap.take("a");
    const a2 = cap.take("a");
    expect(a1.ok && a2.ok).toBe(true);
    const a3 = cap.take("a");
    expect(a3).toEqual({ ok: false, reason: "this node serves at most 2 requests at once from one mesh member; retry shortly" });
    const b1 = cap.take("b");
    const c1 = cap.take("c");
    expect(b1.ok && c1.ok).toBe(true);
    expect(cap.take("d")).toEqual({ ok: false, reason: "this node is serving 4 mesh requests at once, its limit (--max-connections); retry shortly" });
    if (!a1.ok) throw new Error("unreachable");
    a1.release();
    a1.release();
    expect(cap.inUse).toBe(3);
    expect(cap.take("d").ok).toBe(true);
    expect(cap.take("a").ok).toBe(false);
  });

  test("request bytes: one member's streams together up to its budget, every member's up to the total; all of a stream's come back when it ends", () => {
    const cap = new MemberStreamCap(8, 0.5, { perPeerBytes: 100, totalBytes: 150 });
    const a1 = cap.take("a");
    const a2 = cap.take("a");
    const b1 = cap.take("b");
    if (!a1.ok || !a2.ok || !b1.ok) throw new Error("unreachable");
    const steps: [string, () => boolean, boolean, number][] = [
      ["a's first stream holds 60", () => a1.hold(60), true, 60],
      ["a's second stream, 40 more: a at its budget", () => a2.hold(40), true, 100],
      ["a's second stream, 1 more: over a's budget, nothing counted", () => a2.hold(1), false, 100],
      ["b holds 50: the total at its bound", () => b1.hold(50), true, 150],
      ["b, 1 more: over the total though under its own", () => b1.hold(1), false, 150],
      ["a's first stream ends: its 60 come back", () => (a1.release(), true), true, 90],
      ["ended twice: counted once", () => (a1.release(), true), true, 90],
      ["a stream that ended holds nothing more", () => a1.hold(1), false, 90],
      ["a's second stream: 60 more fits a's budget and the total again", () => a2.hold(60), true, 150],
      ["1 more: over both", () => a2.hold(1), false, 150],
    ];
    for (const [what, step, ok, held] of steps) {
      expect([what, step(), cap.bytesHeld]).toEqual([what, ok, held]);
    }
  });

  test("a body handed on gives its bytes back while its place stays for the answer", () => {
    const cap = new MemberStreamCap(4, 0.5, { perPeerBytes: 100, totalBytes: 100 });
    const a = cap.take("a");
    if (!a.ok) throw new Error("unreachable");
    expect(a.hold(100)).toBe(true);
    expect(a.hold(1)).toBe(false);
    a.bodyDone();
    expect([cap.bytesHeld, cap.inUse]).toEqual([0, 1]);
    const b = cap.take("a");
    expect(b.ok && b.hold(100)).toBe(true);
    a.release();
    expect([cap.bytesHeld, cap.inUse]).toEqual([100, 1]);
  });

  test("a cap of one still admits one member", () => {
    const cap = new MemberStreamCap(1);
    expect(cap.perPeer).toBe(1);
    expect(cap.take("a").ok).toBe(true);
    expect(cap.take("b").ok).toBe(false);
  });
});

describe("serveHttp", () => {
  test("a route members may not use gets a 403 in OpenAI's shape; the handler never runs", async () => {
    const [client, server] = streamPair();
    const { seen, handler } = recording();
    const served = serveHttp(server, handler, opts);
    await client.send.writeAll(encodeFrame({ method: "POST", path: "/api/v1/load", headers: { [FORWARDED_HEADER]: "1" } }));
    await client.send.writeAll(new TextEncoder().encode('{"model_name":"x"}'));
    await client.send.finish();
    expect(await readFrame(client.recv)).toEqual({ status: 403, headers: { "content-type": "application/json" } });
    const body = new Uint8Array(4096);
    const n = (await client.recv.read(body))!;
    expect(JSON.parse(new TextDecoder().decode(body.subarray(0, n)))).toEqual({
      error: {
        message: "POST /api/v1/load is not open to mesh members: only the inference routes, the model list and the loaded models are open to mesh members",
        type: "permission_error",
        code: "forbidden_for_mesh_members",
      },
    });
    await bounded(served);
    expect(seen).toEqual([]);
  });

  test("what is served is marked as forwarded by the serving side; the peer's Host and hop headers are not passed on", async () => {
    const [client, server] = streamPair();
    const { seen, handler } = recording();
    const served = serveHttp(server, handler, opts);
    await client.send.writeAll(encodeFrame({ method: "POST", path: "/v1/embeddings", headers: { host: "evil.example", "content-length": "999", "content-type": "application/json" } }));
    await client.send.writeAll(new TextEncoder().encode('{"model":"m"}'));
    await client.send.finish();
    expect(await readFrame(client.recv)).toMatchObject({ status: 200 });
    await bounded(served);
    expect(seen).toHaveLength(1);
    const req = seen[0]!;
    expect(req.headers.get(FORWARDED_HEADER)).toBe("1");
    expect(req.headers.get("content-type")).toBe("application/json");
    expect(new URL(req.url).host).toBe("mesh.local");
    expect(await req.text()).toBe('{"model":"m"}');
  });

  test.each([
    ["no head at all", async () => undefined],
    ["half a head", async (send: { writeAll(b: Uint8Array): Promise<void> }) => send.writeAll(encodeFrame({ method: "GET", path: "/v1/models" }).subarray(0, 10))],
    [
      "a head, then a body that stops",
      async (send: { writeAll(b: Uint8Array): Promise<void> }) => {
        await send.writeAll(encodeFrame({ method: "POST", path: "/v1/chat/completions", headers: {} }));
        await send.writeAll(new TextEncoder().encode('{"model":'));
      },
    ],
  ] as const)("a peer that goes quiet (%s) is given up on; the handler never runs", async (_, write) => {
    const [client, server] = streamPair();
    const { seen, handler } = recording();
    const t0 = performance.now();
    const served = serveHttp(server, handler, opts);
    await write(client.send);
    await bounded(served);
    expect(performance.now() - t0).toBeLessThan(5_000);
    expect(seen).toEqual([]);
    await expect(client.recv.read(new Uint8Array(8))).rejects.toThrow("reset by peer");
  });

  test("beyond the cap: 503 with Retry-After in OpenAI's shape, before any byte of the request is read; the place comes back", async () => {
    const cap = new MemberStreamCap(2);
    const held = cap.take("rogue");
    const [client, server] = streamPair();
    const spy = counted(server);
    const { seen, handler } = recording();
    const served = serveHttp(spy.stream, handler, { ...opts, admit: () => cap.take("rogue") });
    await client.send.writeAll(encodeFrame({ method: "POST", path: "/v1/chat/completions", headers: {} }));
    await client.send.writeAll(new TextEncoder().encode('{"model":"m"}'));
    expect(await readFrame(client.recv)).toEqual({ status: 503, headers: { "content-type": "application/json", "retry-after": "1" } });
    const body = new Uint8Array(4096);
    const n = (await client.recv.read(body))!;
    expect(JSON.parse(new TextDecoder().decode(body.subarray(0, n)))).toEqual({
      error: { message: "this node serves at most 1 requests at once from one mesh member; retry shortly", type: "service_unavailable", code: "too_many_requests" },
    });
    expect(await client.recv.read(body)).toBeNull();
    await bounded(served);
    expect(spy.reads()).toBe(0);
    expect(seen).toEqual([]);
    // The stream was stopped: what the peer still sends is refused.
    await expect(client.send.writeAll(new Uint8Array(1))).rejects.toThrow("stopped by peer");
    if (!held.ok) throw new Error("unreachable");
    held.release();
    expect(cap.inUse).toBe(0);
  });

  test.each([
    ["served", "/v1/embeddings"],
    ["refused", "/api/v1/load"],
  ])("a place taken by a request that is %s comes back when it ends", async (_, path) => {
    const cap = new MemberStreamCap(2);
    const [client, server] = streamPair();
    const served = serveHttp(server, recording().handler, { ...opts, admit: () => cap.take("a") });
    expect(cap.inUse).toBe(1);
    await client.send.writeAll(encodeFrame({ method: "POST", path, headers: {} }));
    await client.send.finish();
    await bounded(served);
    expect(cap.inUse).toBe(0);
  });

  test("a body dripped a byte at a time, each within the idle deadline, is cut off at the total deadline", async () => {
    const [client, server] = streamPair();
    const cap = new MemberStreamCap(2);
    const { seen, handler } = recording();
    const t0 = performance.now();
    const served = serveHttp(server, handler, { ...opts, idleMs: 300, totalMs: 700, admit: () => cap.take("a") });
    await client.send.writeAll(encodeFrame({ method: "POST", path: "/v1/chat/completions", headers: {} }));
    let done = false;
    void served.then(() => (done = true));
    const drip = (async () => {
      while (!done) {
        await Bun.sleep(100);
        await client.send.writeAll(new Uint8Array([0x20])).catch(() => undefined);
      }
    })();
    await bounded(served);
    const took = performance.now() - t0;
    await drip;
    expect(took).toBeGreaterThanOrEqual(650);
    expect(took).toBeLessThan(2_000);
    expect(seen).toEqual([]);
    expect(cap.inUse).toBe(0);
    await expect(client.recv.read(new Uint8Array(8))).rejects.toThrow("reset by peer");
  });

  test("an answer the peer never reads is given up on at the write deadline: its body is cancelled, the stream reset, the place given back", async () => {
    const [client, server] = streamPair();
    const cap = new MemberStreamCap(2);
    let cancelled: unknown = "not cancelled";
    const sse = new ReadableStream<Uint8Array>({
      pull: (controller) => controller.enqueue(new TextEncoder().encode("data: {}\n\n")),
      cancel: (reason) => void (cancelled = reason),
    });
    const handler = async () => new Response(sse, { headers: { "content-type": "text/event-stream" } });
    const t0 = performance.now();
    const served = serveHttp(windowless(server), handler, { ...opts, writeStallMs: 300, admit: () => cap.take("a") });
    await client.send.writeAll(encodeFrame({ method: "POST", path: "/v1/chat/completions", headers: {} }));
    await client.send.writeAll(new TextEncoder().encode('{"stream":true}'));
    await client.send.finish();
    await bounded(served);
    expect(performance.now() - t0).toBeLessThan(2_000);
    expect(cancelled).not.toBe("not cancelled");
    expect(cap.inUse).toBe(0);
    await expect(client.recv.read(new Uint8Array(8))).rejects.toThrow("reset by peer");
  });

  test.each([
    ["a method outside the set", { method: "BREW", path: "/v1/models" }],
    ["an absolute URL", { method: "GET", path: "http://evil.example/v1/models" }],
    ["a path over the bound", { method: "GET", path: `/v1/models/${"a".repeat(5_000)}` }],
    ["too many headers", { method: "GET", path: "/v1/models", headers: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`x-${i}`, "1"])) }],
    ["a header over the bound", { method: "GET", path: "/v1/models", headers: { "x-big": "a".repeat(9_000) } }],
    ["a header name that is no token", { method: "GET", path: "/v1/models", headers: { "bad name": "1" } }],
    ["a header value with a line break", { method: "GET", path: "/v1/models", headers: { "x-a": "1\r\nx-b: 2" } }],
  ])("a head with %s is cut off before the handler", async (_, head) => {
    const [client, server] = streamPair();
    const { seen, handler } = recording();
    const served = serveHttp(server, handler, opts);
    await client.send.writeAll(encodeFrame(head));
    await client.send.finish();
    await bounded(served);
    expect(seen).toEqual([]);
    await expect(readFrame(client.recv)).rejects.toThrow("reset by peer");
  });
});

describe("forwardHttp", () => {
  const req = { method: "POST", path: "/v1/chat/completions", headers: { "content-type": "application/json" }, body: new TextEncoder().encode("{}") };

  test("a serving node that never answers is given up on at the head deadline, with a clear error", async () => {
    const [client] = streamPair();
    const t0 = performance.now();
    const result = forwardHttp(client, req, new AbortController().signal, { headMs: 300, idleMs: 60_000 });
    await expect(withDeadline(result, 10_000, "forwardHttp to give up")).rejects.toThrow("the node serving this model did not send a response head within 300 ms; gave up on it");
    expect(performance.now() - t0).toBeLessThan(5_000);
  });

  test("a serving node that never takes the request body is given up on at the idle deadline: the stream is reset", async () => {
    const [client, server] = streamPair();
    const big = { ...req, body: new Uint8Array(3 << 20) };
    const signal = new AbortController().signal;
    const removed = spyOn(signal, "removeEventListener");
    const t0 = performance.now();
    const result = forwardHttp(windowless(client), big, signal, { headMs: 60_000, idleMs: 300 });
    await expect(withDeadline(result, 10_000, "forwardHttp to give up")).rejects.toThrow("the node serving this model took nothing for 300 ms; gave up on it");
    expect(performance.now() - t0).toBeLessThan(2_000);
    expect(removed).toHaveBeenCalled();
    await expect(server.recv.read(new Uint8Array(8))).rejects.toThrow("reset by peer");
  });

  test("a serving node that ends the stream without a response head: a clear error, the abort listener removed, the stream stopped", async () => {
    const [client, server] = streamPair();
    const signal = new AbortController().signal;
    const removed = spyOn(signal, "removeEventListener");
    const result = forwardHttp(client, req, signal, { headMs: 10_000, idleMs: 10_000 });
    await readFrame(server.recv);
    await server.send.finish();
    await expect(withDeadline(result, 10_000, "forwardHttp to give up")).rejects.toThrow("the node serving this model sent no response head");
    expect(removed).toHaveBeenCalled();
  });

  test("an abort while the request is still going out ends the forward at once", async () => {
    const [client] = streamPair();
    const abort = new AbortController();
    const result = forwardHttp(windowless(client), req, abort.signal, { headMs: 60_000, idleMs: 60_000 });
    abort.abort(new Error("the client went away"));
    await expect(withDeadline(result, 2_000, "forwardHttp to end")).rejects.toThrow("the client went away");
  });

  test("a client gone before the forward starts: it ends at once, and the exchange it leaves behind fails later without an unhandled rejection", async () => {
    const [client, server] = streamPair();
    const abort = new AbortController();
    abort.abort(new Error("the client went away"));
    const unhandled: unknown[] = [];
    const onUnhandled = (err: unknown) => void unhandled.push(err);
    process.on("unhandledRejection", onUnhandled);
    try {
      await expect(withDeadline(forwardHttp(client, req, abort.signal, { headMs: 60_000, idleMs: 60_000 }), 2_000, "forwardHttp to end")).rejects.toThrow("the client went away");
      // The abandoned exchange fails once the stream is reset (by the forward's own give-up, or the peer): a few turns for it to settle.
      await server.send.reset(0);
      for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled).toEqual([]);
    } finally {
      process.off("unhandledRejection", onUnhandled);
    }
  });

  test("a stream that stops mid-answer fails after the idle deadline, having passed what came", async () => {
    const [client, server] = streamPair();
    const res = forwardHttp(client, req, new AbortController().signal, { headMs: 10_000, idleMs: 300 });
    await readFrame(server.recv);
    await server.send.writeAll(Buffer.concat([encodeFrame({ status: 200, headers: { "content-type": "text/event-stream" } }), new TextEncoder().encode("data: {}\n\n")]));
    const reader = (await res).body!.getReader();
    const first = await withDeadline(reader.read(), 10_000, "the first event");
    expect(new TextDecoder().decode(first.value)).toBe("data: {}\n\n");
    await expect(withDeadline(reader.read(), 10_000, "the body to fail")).rejects.toThrow();
  });
});
