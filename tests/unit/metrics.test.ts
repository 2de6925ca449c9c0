import { describe, expect, test } from "bun:test";
import { Hono } from "hono";
import { modelLabel, peerLabel, routeLabel, tunnelBytes } from "../../metrics/labels.ts";
import { NodeMetrics, type MetricSources } from "../../metrics/node-metrics.ts";
import type { EvictionCause } from "../../pool/pool.ts";
import type { QueueObserver } from "../../pool/slot-queue.ts";
import { modelNotFound } from "../../pool/errors.ts";
import { respondToError } from "../../router/http/errors.ts";
import { requestMetrics } from "../../router/http/request-metrics.ts";
import type { RequestStats } from "../../metrics/request-stats.ts";
import type { PeerTunnelCounters } from "../../tunnel/tunnels.ts";
import { bucketBounds, labelSets, observationsOf, parseScrape, valueOf } from "../../harness/prometheus.ts";

const INFERENCE = new Set(["/v1/chat/completions", "/v1/embeddings", "/v1/reranking", "/api/chat"]);

test.each([
  ["/v1/chat/completions", "/v1/chat/completions"],
  ["/v1/reranking", "/v1/reranking"],
  ["/v1/models", "/v1/models"],
  ["/v1/models/qwen", "/v1/models/{id}"],
  ["/v1/models/org/name", "/v1/models/{id}"],
  ["/v1/chat/completions/", "other"],
  ["/v1/nothing-here", "other"],
  ["/v1/chat/completions?x=1", "other"],
  ["/api/chat", "/api/chat"],
  ["/api/tags", "other"],
])("routeLabel(%p) = %p", (path, label) => expect(routeLabel(path, INFERENCE)).toBe(label));

test.each([
  [undefined, 200, ""],
  [undefined, 400, ""],
  [undefined, 404, ""],
  ["qwen", 200, "qwen"],
  ["qwen", 503, "qwen"],
  ["no-such-model", 404, "unknown"],
])("modelLabel(%p, %p) = %p", (model, status, label) => expect(modelLabel(model, status)).toBe(label));

test("peers are labelled by their short id", () => {
  expect(peerLabel("0123456789abcdef0123456789abcdef")).toBe("0123456789");
});

const tunnel = (toPeer: number, fromPeer: number, toPeerHost: number, fromPeerHost: number): PeerTunnelCounters => ({
  toPeer: { bytes: toPeer },
  fromPeer: { bytes: fromPeer },
  toPeerHost: { bytes: toPeerHost },
  fromPeerHost: { bytes: fromPeerHost },
  connectionsOut: 1,
  connectionsIn: 1,
  sessionsIn: 0,
  rewrites: 0,
  direct: false,
});

test("tunnel bytes add the host and worker sides of each direction", () => {
  expect(tunnelBytes(tunnel(1, 20, 300, 4000))).toEqual({ in: 4020, out: 301 });
});

function fakeSources() {
  const counters = { loads: 0, loadFailures: 0, evictions: new Map<EvictionCause, number>() };
  const servers: { state: string }[] = [];
  const tunnels = new Map<string, PeerTunnelCounters>();
  let peers = 0;
  const sources = {
    pool: { counters, loaded: () => servers },
    peers: () => peers,
    tunnels: () => tunnels,
  } as unknown as MetricSources;
  return { sources, counters, servers, tunnels, setPeers: (n: number) => void (peers = n) };
}

const stats = (model: string, input: number | null, output: number | null): RequestStats => ({
  model,
  route: "/v1/chat/completions",
  time_to_first_token: null,
  tokens_per_second: null,
  input_tokens: input,
  output_tokens: output,
  duration: 1,
});

describe("NodeMetrics", () => {
  test("reads the pool, peers and tunnels when scraped", async () => {
    const f = fakeSources();
    const m = new NodeMetrics(f.sources);
    let s = parseScrape(await m.scrape());
    expect(valueOf(s, "mesh_model_loads_total")).toBe(0);
    // Every cause has a series before its first eviction.
    expect(labelSets(s, "mesh_model_evictions_total").map((l) => l.cause).sort()).toEqual(["idle", "lru", "npu", "nuclear", "reload", "unload"]);

    f.counters.loads = 3;
    f.counters.loadFailures = 1;
    f.counters.evictions.set("lru", 2);
    f.counters.evictions.set("idle", 1);
    f.servers.push({ state: "ready" }, { state: "starting" }, { state: "ready" });
    f.setPeers(2);
    f.tunnels.set("aaaaaaaaaaXXXXXXXX", tunnel(10, 20, 30, 40));
    f.tunnels.set("bbbbbbbbbbYYYYYYYY", tunnel(1, 0, 0, 0));
    s = parseScrape(await m.scrape());
    expect(valueOf(s, "mesh_model_loads_total")).toBe(3);
    expect(valueOf(s, "mesh_model_load_failures_total")).toBe(1);
    expect(valueOf(s, "mesh_model_evictions_total", { cause: "lru" })).toBe(2);
    expect(valueOf(s, "mesh_model_evictions_total", { cause: "idle" })).toBe(1);
    expect(valueOf(s, "mesh_model_evictions_total", { cause: "nuclear" })).toBe(0);
    expect(valueOf(s, "mesh_models_loaded", {}, "gauge")).toBe(2);
    expect(valueOf(s, "mesh_peers", {}, "gauge")).toBe(2);
    expect(valueOf(s, "mesh_tunnel_bytes_total", { peer: "aaaaaaaaaa", direction: "out" })).toBe(40);
    expect(valueOf(s, "mesh_tunnel_bytes_total", { peer: "aaaaaaaaaa", direction: "in" })).toBe(60);
    expect(valueOf(s, "mesh_tunnel_bytes_total", { peer: "bbbbbbbbbb", direction: "out" })).toBe(1);
  });

  test("counts requests by status, times them, and counts tokens from figures read once, later", async () => {
    const m = new NodeMetrics(fakeSources().sources);
    m.answered("/v1/chat/completions", "a", 200, 0.2);
    m.answered("/v1/chat/completions", "a", 200, 3);
    m.answered("/v1/chat/completions", "a", 503, 0.001);
    m.answered("/v1/chat/completions", "a", 200, undefined);
    m.streamEnded("/v1/chat/completions", "a", 7, 0.5);
    m.answered("/v1/chat/completions", "unknown", 404, 0.01);
    m.forwarded("0123456789abcdef");
    let reads = 0;
    m.countTokens(() => (reads++, stats("a", 12, 5)));
    m.countTokens(() => (reads++, stats("a", 3, null)));
    expect(reads).toBe(0);

    const text = await m.scrape();
    expect(reads).toBe(2);
    const s = parseScrape(text);
    expect(valueOf(s, "mesh_requests_total", { model: "a", route: "/v1/chat/completions", status: "200" })).toBe(3);
    expect(valueOf(s, "mesh_requests_total", { model: "a", status: "503" })).toBe(1);
    expect(valueOf(s, "mesh_requests_total", { model: "unknown", status: "404" })).toBe(1);
    expect(observationsOf(s, "mesh_request_duration_seconds", { model: "a" })).toBe(4);
    expect(observationsOf(s, "mesh_time_to_first_byte_seconds", { model: "a" })).toBe(1);
    expect(valueOf(s, "mesh_tokens_total", { model: "a", direction: "in" })).toBe(15);
    expect(valueOf(s, "mesh_tokens_total", { model: "a", direction: "out" })).toBe(5);
    expect(valueOf(s, "mesh_forwarded_requests_total", { peer: "0123456789" })).toBe(1);
    const buckets = bucketBounds(s, "mesh_request_duration_seconds");
    expect([buckets[0], buckets.at(-2), buckets.at(-1)]).toEqual(["0.005", "120", "+Inf"]);

    // Read once: the next scrape counts nothing again.
    expect(valueOf(parseScrape(await m.scrape()), "mesh_tokens_total", { direction: "in" })).toBe(15);
    expect(reads).toBe(2);
  });

  test("counts tokens soon after the answer even without a scrape", async () => {
    const m = new NodeMetrics(fakeSources().sources);
    let reads = 0;
    m.countTokens(() => (reads++, stats("a", 1, 1)));
    await new Promise((resolve) => setImmediate(resolve));
    expect(reads).toBe(1);
  });

  test("each has a registry of its own", async () => {
    const a = new NodeMetrics(fakeSources().sources);
    const b = new NodeMetrics(fakeSources().sources);
    a.answered("/v1/models", "", 200, 0.01);
    expect(valueOf(parseScrape(await b.scrape()), "mesh_requests_total")).toBe(0);
  });
});

describe("the request middleware", () => {
  const sse = () => new Response("data: [DONE]\n\n", { headers: { "content-type": "text/event-stream" } });
  function app() {
    const metrics = new NodeMetrics(fakeSources().sources);
    const { count, observer } = requestMetrics(metrics);
    const a = new Hono();
    a.use("/v1/*", count);
    a.post("/v1/chat/completions", async (c) => {
      const { model, stream } = (await c.req.json()) as { model?: string; stream?: boolean };
      if (!model) return c.json({ error: "no model" }, 400);
      observer.named(c, model);
      if (model === "nope") throw modelNotFound(`model "${model}" is not known`);
      if (!stream) {
        observer.answered(c, () => stats(model, 4, 2), undefined);
        return c.json({ ok: true });
      }
      const res = sse();
      // The proxy tells of a stream's end after its head went out.
      queueMicrotask(() => observer.answered(c, () => stats(model, 4, 6), { firstByteAt: performance.now() }));
      return res;
    });
    a.get("/v1/models", (c) => c.json({ data: [] }));
    a.onError((err, c) => respondToError(c, err));
    return { a, metrics };
  }
  const post = (a: Hono, body: unknown) => a.request("/v1/chat/completions", { method: "POST", body: JSON.stringify(body) });

  test("labels each request by route, model and status; streams are timed when they end", async () => {
    const { a, metrics } = app();
    expect((await post(a, { model: "m" })).status).toBe(200);
    expect((await post(a, { model: "m", stream: true })).status).toBe(200);
    await Promise.resolve();
    expect((await post(a, { model: "nope" })).status).toBe(404);
    expect((await post(a, {})).status).toBe(400);
    expect((await a.request("/v1/models")).status).toBe(200);
    expect((await a.request("/v1/whatever")).status).toBe(404);

    const s = parseScrape(await metrics.scrape());
    const chat = "/v1/chat/completions";
    expect(valueOf(s, "mesh_requests_total", { model: "m", route: chat, status: "200" })).toBe(2);
    expect(valueOf(s, "mesh_requests_total", { model: "unknown", route: chat, status: "404" })).toBe(1);
    expect(valueOf(s, "mesh_requests_total", { model: "", route: chat, status: "400" })).toBe(1);
    expect(valueOf(s, "mesh_requests_total", { model: "", route: "/v1/models", status: "200" })).toBe(1);
    expect(valueOf(s, "mesh_requests_total", { model: "", route: "other", status: "404" })).toBe(1);
    expect(labelSets(s, "mesh_requests_total").map((l) => l.model)).not.toContain("nope");
    // Once each: the JSON answer by the middleware, the stream by its end.
    expect(observationsOf(s, "mesh_request_duration_seconds", { model: "m", route: chat })).toBe(2);
    expect(observationsOf(s, "mesh_time_to_first_byte_seconds", { model: "m", route: chat })).toBe(1);
    expect(valueOf(s, "mesh_tokens_total", { model: "m", direction: "in" })).toBe(8);
    expect(valueOf(s, "mesh_tokens_total", { model: "m", direction: "out" })).toBe(8);
  });

  test("countAs counts a request once, under another route's name (an OpenAI route under a Lemonade base, as its /v1 one)", async () => {
    const metrics = new NodeMetrics(fakeSources().sources);
    const { countAs, observer } = requestMetrics(metrics);
    const a = new Hono();
    a.use("/api/v1/*", countAs("/v1/chat/completions"));
    a.post("/api/v1/chat/completions", (c) => {
      observer.named(c, "m");
      queueMicrotask(() => observer.answered(c, () => stats("m", 1, 2), { firstByteAt: performance.now() }));
      return sse();
    });
    expect((await a.request("/api/v1/chat/completions", { method: "POST", body: "{}" })).status).toBe(200);
    await Promise.resolve();
    const s = parseScrape(await metrics.scrape());
    expect(valueOf(s, "mesh_requests_total", { model: "m", route: "/v1/chat/completions", status: "200" })).toBe(1);
    expect(valueOf(s, "mesh_requests_total", { route: "/api/v1/chat/completions" })).toBe(0);
    expect(observationsOf(s, "mesh_request_duration_seconds", { model: "m", route: "/v1/chat/completions" })).toBe(1);
  });

  test("Ollama's NDJSON stream is timed once, by its end, like SSE", async () => {
    const metrics = new NodeMetrics(fakeSources().sources);
    const { count, observer } = requestMetrics(metrics);
    const a = new Hono();
    a.use("/api/chat", count);
    a.post("/api/chat", (c) => {
      observer.named(c, "m");
      queueMicrotask(() => observer.answered(c, () => stats("m", 1, 2), { firstByteAt: performance.now() }));
      return new Response('{"done":true}\n', { headers: { "content-type": "application/x-ndjson" } });
    });
    expect((await a.request("/api/chat", { method: "POST", body: "{}" })).status).toBe(200);
    await Promise.resolve();
    const s = parseScrape(await metrics.scrape());
    expect(valueOf(s, "mesh_requests_total", { model: "m", route: "/api/chat", status: "200" })).toBe(1);
    expect(observationsOf(s, "mesh_request_duration_seconds", { model: "m", route: "/api/chat" })).toBe(1);
  });

  test("an answer no middleware saw counts its tokens and times nothing (no NaN)", async () => {
    const metrics = new NodeMetrics(fakeSources().sources);
    const { observer } = requestMetrics(metrics);
    const a = new Hono();
    a.post("/x", (c) => {
      observer.answered(c, () => stats("m", 1, 2), { firstByteAt: performance.now() });
      return c.json({});
    });
    expect((await a.request("/x", { method: "POST" })).status).toBe(200);
    const s = parseScrape(await metrics.scrape());
    expect(valueOf(s, "mesh_tokens_total", { model: "m", direction: "out" })).toBe(2);
    expect(observationsOf(s, "mesh_request_duration_seconds")).toBe(0);
  });
});

describe("the exposition parser of the tests", () => {
  test("reads families, labels (escaped) and histograms", () => {
    const s = parseScrape(
      [
        "# HELP a_total What a counts",
        "# TYPE a_total counter",
        'a_total{x="q\\"uote\\\\",y="line\\nbreak"} 2',
        "a_total 1.5",
        "# TYPE h histogram",
        'h_bucket{le="0.1",m="x"} 1',
        'h_bucket{le="+Inf",m="x"} 3',
        'h_sum{m="x"} 0.7',
        'h_count{m="x"} 3',
        "",
      ].join("\n"),
    );
    expect(s.get("a_total")!.help).toBe("What a counts");
    expect(labelSets(s, "a_total")[0]).toEqual({ x: 'q"uote\\', y: "line\nbreak" });
    expect(valueOf(s, "a_total")).toBe(3.5);
    expect(observationsOf(s, "h", { m: "x" })).toBe(3);
    expect(bucketBounds(s, "h")).toEqual(["0.1", "+Inf"]);
  });

  test.each([
    ["a sample without # TYPE", "a 1"],
    ["an unquoted label value", "# TYPE a counter\na{x=1} 1"],
    ["a value that is no number", "# TYPE a counter\na one"],
    ["a bucket of another type's name", "# TYPE a counter\na_bucket 1"],
    ["buckets that shrink", '# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_count 1'],
    ["no +Inf bucket", '# TYPE h histogram\nh_bucket{le="1"} 2\nh_count 2'],
  ])("rejects %s", (_, text) => expect(() => parseScrape(text)).toThrow());
});

describe("NodeMetrics: the queues", () => {
  test("slots, in flight and depth per loaded model when scraped; waits and refusals as they happen", async () => {
    const f = fakeSources();
    let figures = [{ model: "a", slots: 2, inFlight: 2, queued: 3, waitMs: 40 }];
    let observer: QueueObserver | undefined;
    Object.assign(f.sources.pool, { queueFigures: () => figures, observeQueues: (o: QueueObserver) => void (observer = o) });
    const m = new NodeMetrics(f.sources);
    observer!.waited("a", 0);
    observer!.waited("a", 1500);
    observer!.rejected("a");
    let s = parseScrape(await m.scrape());
    expect(valueOf(s, "mesh_queue_slots", { model: "a" }, "gauge")).toBe(2);
    expect(valueOf(s, "mesh_queue_in_flight", { model: "a" }, "gauge")).toBe(2);
    expect(valueOf(s, "mesh_queue_depth", { model: "a" }, "gauge")).toBe(3);
    expect(observationsOf(s, "mesh_queue_wait_seconds", { model: "a" })).toBe(2);
    expect(valueOf(s, "mesh_queue_rejected_total", { model: "a" })).toBe(1);
    // A model unloaded since: its gauges go, its counts stay.
    figures = [];
    s = parseScrape(await m.scrape());
    expect(labelSets(s, "mesh_queue_depth")).toEqual([]);
    expect(valueOf(s, "mesh_queue_rejected_total", { model: "a" })).toBe(1);
  });

  test("a pool without queues (a fake) scrapes without them", async () => {
    const s = parseScrape(await new NodeMetrics(fakeSources().sources).scrape());
    expect(labelSets(s, "mesh_queue_slots")).toEqual([]);
  });
});
