/**
 * The router's part in the node's metrics: a middleware that counts every inference request by route,
 * model and status and times the answers that are complete when the handler returns (`countAs`: the
 * same under another route's name, for Lemonade's bases counted as `/v1`); what the
 * inference handlers tell it (the model a body names, a request sent to a peer, the end of a model's
 * answer, whose tokens and, for a stream, duration and first byte are counted then); `GET /metrics`.
 */
import type { Context, Handler, MiddlewareHandler } from "hono";
import { modelLabel, routeLabel } from "../../metrics/labels.ts";
import type { NodeMetrics } from "../../metrics/node-metrics.ts";
import { INFERENCE_PATHS, OLLAMA_INFERENCE_PATHS } from "./route-table.ts";
import type { RequestStats } from "../../metrics/request-stats.ts";

declare module "hono" {
  interface ContextVariableMap {
    /** performance.now() when the request came. */
    requestStartedAt: number;
    /** The model the request's body names. */
    requestModel: string;
    /** The route the request is counted under. */
    requestRoute: string;
  }
}

/** What inference handlers tell the metrics. */
export interface InferenceObserver {
  /** The request's body names `model`. */
  named(c: Context, model: string): void;
  forwarded(peerId: string): void;
  /** The model's answer is complete: its figures, and for a stream when its first bytes came. */
  answered(c: Context, stats: () => RequestStats, stream: { firstByteAt: number | undefined } | undefined): void;
}

/** A generation streamed as it goes: SSE, or Ollama's NDJSON. */
const isStreamed = (res: Response) => /text\/event-stream|application\/x-ndjson/.test(res.headers.get("content-type") ?? "");

export interface RequestMetrics {
  /** Counts a request under its own path. */
  count: MiddlewareHandler;
  /** Counts a request under `path` instead (an OpenAI route under a Lemonade base, as its `/v1` one). */
  countAs(path: string): MiddlewareHandler;
  observer: InferenceObserver;
}

export function requestMetrics(metrics: NodeMetrics): RequestMetrics {
  const inferencePaths = new Set([...INFERENCE_PATHS, ...OLLAMA_INFERENCE_PATHS]);
  const secondsSince = (c: Context, at = performance.now()) => (at - c.get("requestStartedAt")) / 1000;
  const countAs =
    (path: string | undefined): MiddlewareHandler =>
    async (c, next) => {
      c.set("requestStartedAt", performance.now());
      c.set("requestRoute", routeLabel(path ?? c.req.path, inferencePaths));
      await next();
      const status = c.res.status;
      // A stream is timed when it ends (`answered`), not when its head goes out.
      const seconds = isStreamed(c.res) ? undefined : secondsSince(c);
      metrics.answered(c.get("requestRoute"), modelLabel(c.get("requestModel"), status), status, seconds);
    };
  const observer: InferenceObserver = {
    named: (c, model) => c.set("requestModel", model),
    forwarded: (peerId) => metrics.forwarded(peerId),
    answered(c, stats, stream) {
      metrics.countTokens(stats);
      // A request no `count` saw has no start to time from (NaN would make the histogram throw).
      if (!stream || c.get("requestStartedAt") === undefined) return;
      const firstByte = stream.firstByteAt === undefined ? undefined : secondsSince(c, stream.firstByteAt);
      metrics.streamEnded(c.get("requestRoute"), c.get("requestModel"), secondsSince(c), firstByte);
    },
  };
  return { count: countAs(undefined), countAs, observer };
}

/** `GET /metrics`: Prometheus' text format. */
export function scrapeMetrics(metrics: NodeMetrics): Handler {
  return async (c) => c.body(await metrics.scrape(), 200, { "content-type": metrics.registry.contentType });
}
