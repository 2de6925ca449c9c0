/**
 * The node's Prometheus metrics, in a registry of its own: requests, their duration and time to
 * first byte per model and route, tokens in and out per model, requests sent to peers. What other
 * parts already count (the pool's loads, failures and evictions; loaded models; peers; tunnel
 * bytes) is read from them when scraped, never counted twice.
 */
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { EvictionCause, Pool } from "../pool/pool.ts";
import type { TrafficSample } from "../console/protocol.ts";
import type { RequestStats } from "./request-stats.ts";
import type { KvFollowCounters } from "../kv/kv-follow.ts";
import type { KvHolderCounters } from "../kv/kv-holder.ts";
import type { PeerTunnelCounters } from "../tunnel/tunnels.ts";
import { DURATION_BUCKETS, peerLabel, QUEUE_WAIT_BUCKETS, tunnelBytes } from "./labels.ts";
import { isLoaded } from "../pool/wrapped-server.ts";

export interface MetricSources {
  /** The pool; its queues (slots, waits, refusals) when it has them (a test's fake may not). */
  pool: Pick<Pool, "counters" | "loaded"> & Partial<Pick<Pool, "queueFigures" | "observeQueues" | "slotCounters">>;
  /** Peers connected now; none without a mesh. */
  peers?: () => number;
  /** Tunnel byte counters by peer id. */
  tunnels?: () => ReadonlyMap<string, PeerTunnelCounters>;
  /** Conversations' KV caches fetched from members (none: not fetched) and given to them (`kv/`). */
  kv?: () => { follow: KvFollowCounters | undefined; holder: KvHolderCounters };
}

/** Every cause, so each has a series (at 0) before its first eviction. */
const EVICTION_CAUSES = Object.keys({ lru: 0, npu: 0, nuclear: 0, idle: 0, unload: 0, reload: 0 } satisfies Record<EvictionCause, 0>) as EvictionCause[];

/** One route and model's series, looked up once and kept, so counting allocates no labels. */
interface RequestSeries {
  byStatus: Map<number, Counter.Internal>;
  duration: Histogram.Internal<"model" | "route">;
  firstByte: Histogram.Internal<"model" | "route">;
}

export class NodeMetrics {
  readonly registry = new Registry();
  private readonly requests: Counter<"model" | "route" | "status">;
  private readonly duration: Histogram<"model" | "route">;
  private readonly firstByte: Histogram<"model" | "route">;
  private readonly tokens: Counter<"model" | "direction">;
  private readonly toPeers: Counter<"peer">;
  private readonly draftTokens: Counter<"model">;
  private readonly draftAccepted: Counter<"model">;
  private readonly series = new Map<string, Map<string, RequestSeries>>();
  private readonly tokenSeries = new Map<string, { in: Counter.Internal; out: Counter.Internal }>();
  /** Answers whose token counts are still to be read: after the response is on its way, or at the next scrape. */
  private pending: (() => RequestStats)[] = [];
  private drainQueued = false;
  private readonly kvCounters: MetricSources["kv"];

  constructor(sources: MetricSources) {
    const registers = [this.registry];
    const { pool } = sources;
    this.kvCounters = sources.kv;
    this.requests = new Counter({ name: "mesh_requests_total", help: "Requests to /v1, by model, route and HTTP status", labelNames: ["model", "route", "status"], registers });
    this.duration = new Histogram({
      name: "mesh_request_duration_seconds",
      help: "Time from a /v1 request's arrival to the end of its answer (streams relayed from a peer are timed on that peer)",
      labelNames: ["model", "route"],
      buckets: DURATION_BUCKETS,
      registers,
    });
    this.firstByte = new Histogram({
      name: "mesh_time_to_first_byte_seconds",
      help: "Time from a streamed request's arrival to the first bytes of the model's answer",
      labelNames: ["model", "route"],
      buckets: DURATION_BUCKETS,
      registers,
    });
    this.tokens = new Counter({ name: "mesh_tokens_total", help: "Tokens of the requests this node's models answered, as llama-server reported them", labelNames: ["model", "direction"], registers });
    this.draftTokens = new Counter({ name: "mesh_draft_tokens_total", help: "Tokens a draft model proposed (speculative decoding), by model, as llama-server reported them", labelNames: ["model"], registers });
    this.draftAccepted = new Counter({ name: "mesh_draft_accepted_total", help: "Draft tokens the model accepted (speculative decoding), by model", labelNames: ["model"], registers });
    this.toPeers = new Counter({ name: "mesh_forwarded_requests_total", help: "Requests sent to the peer that serves their model", labelNames: ["peer"], registers });
    new Counter({
      name: "mesh_model_loads_total",
      help: "Models loaded by this node",
      registers,
      collect() {
        this.reset();
        this.inc(pool.counters.loads);
      },
    });
    new Counter({
      name: "mesh_model_load_failures_total",
      help: "Model loads that failed (after the retry with every idle model unloaded)",
      registers,
      collect() {
        this.reset();
        this.inc(pool.counters.loadFailures);
      },
    });
    new Counter({
      name: "mesh_model_evictions_total",
      help: "Models unloaded, by cause",
      labelNames: ["cause"],
      registers,
      collect() {
        this.reset();
        for (const cause of EVICTION_CAUSES) this.inc({ cause }, pool.counters.evictions.get(cause) ?? 0);
      },
    });
    const slots = () => pool.slotCounters;
    new Counter({
      name: "mesh_kv_slots_total",
      help: "Conversations' KV caches (llama-server slots) saved when their model unloaded and restored when it loaded again, and those that failed",
      labelNames: ["event"],
      registers,
      collect() {
        this.reset();
        const c = slots();
        for (const [event, n] of [["saved", c?.saved], ["restored", c?.restored], ["failed", c?.failed]] as const) this.inc({ event }, n ?? 0);
      },
    });
    new Counter({
      name: "mesh_kv_slot_bytes_total",
      help: "Bytes of saved KV caches written and read back",
      labelNames: ["direction"],
      registers,
      collect() {
        this.reset();
        const c = slots();
        this.inc({ direction: "saved" }, c?.savedBytes ?? 0);
        this.inc({ direction: "restored" }, c?.restoredBytes ?? 0);
      },
    });
    const kv = () => this.kvCounters?.();
    new Counter({
      name: "mesh_kv_follow_total",
      help: "Moved conversations whose KV cache this node asked the member that held it for: fetched and restored (hit), none to give (miss), read again as faster (declined), failed",
      labelNames: ["event"],
      registers,
      collect() {
        this.reset();
        const f = kv()?.follow;
        for (const [event, n] of [["hit", f?.hits], ["miss", f?.misses], ["declined", f?.declined], ["failed", f?.failed]] as const) this.inc({ event }, n ?? 0);
      },
    });
    new Counter({
      name: "mesh_kv_follow_bytes_total",
      help: "Bytes of conversations' KV caches fetched from members and sent to them",
      labelNames: ["direction"],
      registers,
      collect() {
        this.reset();
        const c = kv();
        this.inc({ direction: "fetched" }, c?.follow?.bytes ?? 0);
        this.inc({ direction: "sent" }, c?.holder.sentBytes ?? 0);
      },
    });
    new Counter({
      name: "mesh_kv_follow_saved_seconds_total",
      help: "Prompt reading that fetched KV caches saved, estimated from this node's own measured reading rate (a fast one assumed before it has one; never the holder's) less the fetch's time",
      registers,
      collect() {
        this.reset();
        this.inc((kv()?.follow?.savedMs ?? 0) / 1000);
      },
    });
    new Gauge({
      name: "mesh_models_loaded",
      help: "Models loaded and ready to answer",
      registers,
      collect() {
        this.set(pool.loaded().filter((s) => isLoaded(s.state)).length);
      },
    });
    this.queueMetrics(sources.pool, registers);
    new Gauge({
      name: "mesh_peers",
      help: "Peers this node is connected to",
      registers,
      collect() {
        this.set(sources.peers?.() ?? 0);
      },
    });
    new Counter({
      name: "mesh_tunnel_bytes_total",
      help: "Bytes of RPC tunnels (this node's splits and its peers' splits over it), by peer and direction",
      labelNames: ["peer", "direction"],
      registers,
      collect() {
        this.reset();
        for (const [id, c] of sources.tunnels?.() ?? []) {
          const bytes = tunnelBytes(c);
          this.inc({ peer: peerLabel(id), direction: "in" }, bytes.in);
          this.inc({ peer: peerLabel(id), direction: "out" }, bytes.out);
        }
      },
    });
  }

  /**
   * Each loaded model's queue as it is when scraped (slots, requests running, requests waiting),
   * and as it goes: how long requests waited for a slot, how many a full queue refused. Models are
   * the node's own loaded ones, so the labels stay few.
   */
  private queueMetrics(pool: MetricSources["pool"], registers: Registry[]): void {
    const gauge = (name: string, help: string, figure: "slots" | "inFlight" | "queued") =>
      new Gauge({
        name,
        help,
        labelNames: ["model"],
        registers,
        collect() {
          this.reset();
          for (const q of pool.queueFigures?.() ?? []) this.set({ model: q.model }, q[figure]);
        },
      });
    gauge("mesh_queue_slots", "Slots of each loaded model's server (llama-server's total_slots)", "slots");
    gauge("mesh_queue_in_flight", "Requests holding a slot of each loaded model's server", "inFlight");
    gauge("mesh_queue_depth", "Requests waiting for a slot of each loaded model's server", "queued");
    const wait = new Histogram({ name: "mesh_queue_wait_seconds", help: "Time requests waited for a slot of their model's server (0 when one was free)", labelNames: ["model"], buckets: QUEUE_WAIT_BUCKETS, registers });
    const rejected = new Counter({ name: "mesh_queue_rejected_total", help: "Requests answered 429 because their model's queue was full (--max-queue)", labelNames: ["model"], registers });
    // One child per model, looked up once: a label lookup per request hashes the labels each time.
    const waitOf = new Map<string, Histogram.Internal<"model">>();
    const waited = (model: string, ms: number) => {
      let h = waitOf.get(model);
      if (!h) waitOf.set(model, (h = wait.labels({ model })));
      h.observe(ms / 1000);
    };
    pool.observeQueues?.({ waited, rejected: (model) => rejected.inc({ model }) });
  }

  private seriesOf(route: string, model: string): RequestSeries {
    let byModel = this.series.get(route);
    if (!byModel) this.series.set(route, (byModel = new Map()));
    let s = byModel.get(model);
    if (!s) {
      const labels = { model, route };
      byModel.set(model, (s = { byStatus: new Map(), duration: this.duration.labels(labels), firstByte: this.firstByte.labels(labels) }));
    }
    return s;
  }

  /** A request was answered with `status`; `seconds` when its answer was complete then (not a stream). */
  answered(route: string, model: string, status: number, seconds: number | undefined): void {
    const s = this.seriesOf(route, model);
    let count = s.byStatus.get(status);
    if (!count) s.byStatus.set(status, (count = this.requests.labels({ model, route, status: String(status) })));
    count.inc();
    if (seconds !== undefined) s.duration.observe(seconds);
  }

  /** A streamed answer ended, `seconds` after the request came; its first bytes came after `firstByteSeconds`. */
  streamEnded(route: string, model: string, seconds: number, firstByteSeconds: number | undefined): void {
    const s = this.seriesOf(route, model);
    s.duration.observe(seconds);
    if (firstByteSeconds !== undefined) s.firstByte.observe(firstByteSeconds);
  }

  /** Counts the tokens of an answer from its (lazily worked out) figures, once the response is on its way. */
  countTokens(stats: () => RequestStats): void {
    this.pending.push(stats);
    if (this.drainQueued) return;
    this.drainQueued = true;
    setImmediate(this.drain);
  }

  private readonly drain = (): void => {
    this.drainQueued = false;
    const pending = this.pending;
    this.pending = [];
    for (const stats of pending) {
      const s = stats();
      let t = this.tokenSeries.get(s.model);
      if (!t) this.tokenSeries.set(s.model, (t = { in: this.tokens.labels({ model: s.model, direction: "in" }), out: this.tokens.labels({ model: s.model, direction: "out" }) }));
      // Figures are finite numbers or null (toStats); a counter only takes what is above 0.
      if ((s.input_tokens ?? 0) > 0) t.in.inc(s.input_tokens!);
      if ((s.output_tokens ?? 0) > 0) t.out.inc(s.output_tokens!);
      // Only models that drafted get these series; acceptance is accepted / tokens.
      if (s.draft_tokens !== undefined) {
        this.draftTokens.inc({ model: s.model }, s.draft_tokens);
        this.draftAccepted.inc({ model: s.model }, s.draft_accepted ?? 0);
      }
    }
  };

  forwarded(peerId: string): void {
    this.toPeers.inc({ peer: peerLabel(peerId) });
  }

  /**
   * This node's counters as the console charts them (cumulative; the page draws rates): requests,
   * tokens and time to first byte per model (requests that named none, or an unknown one, left out),
   * and requests sent to each peer by its short id.
   */
  async traffic(): Promise<{ models: TrafficSample["models"]; forwarded: Map<string, number>; kv: TrafficSample["kv"] }> {
    if (this.pending.length) this.drain();
    const models: TrafficSample["models"] = {};
    const of = (model: unknown) => {
      if (typeof model !== "string" || model === "" || model === "unknown") return undefined;
      return (models[model] ??= { requests: 0, tokensIn: 0, tokensOut: 0, ttftSumS: 0, ttftCount: 0 });
    };
    for (const v of (await this.requests.get()).values) {
      const m = of(v.labels.model);
      if (m) m.requests += v.value;
    }
    for (const v of (await this.tokens.get()).values) {
      const m = of(v.labels.model);
      if (m && v.labels.direction === "in") m.tokensIn += v.value;
      else if (m) m.tokensOut += v.value;
    }
    for (const v of (await this.firstByte.get()).values) {
      const m = of(v.labels.model);
      const name = (v as { metricName?: string }).metricName ?? "";
      if (m && name.endsWith("_sum")) m.ttftSumS += v.value;
      else if (m && name.endsWith("_count")) m.ttftCount += v.value;
    }
    const forwarded = new Map<string, number>();
    for (const v of (await this.toPeers.get()).values) forwarded.set(String(v.labels.peer), v.value);
    const c = this.kvCounters?.();
    const kv = c && { hits: c.follow?.hits ?? 0, misses: c.follow?.misses ?? 0, declined: c.follow?.declined ?? 0, failed: c.follow?.failed ?? 0, fetchedBytes: c.follow?.bytes ?? 0, sentBytes: c.holder.sentBytes, savedS: (c.follow?.savedMs ?? 0) / 1000 };
    return { models, forwarded, kv };
  }

  /** The exposition text, with every answer so far counted. */
  async scrape(): Promise<string> {
    if (this.pending.length) this.drain();
    return this.registry.metrics();
  }
}
