/**
 * The node's HTTP API as one Hono app: `/health`, `/metrics`, the OpenAI-compatible `/v1`, the
 * management `/api/v1`. Cross-cutting rules live here once: request metrics, body size limit, API
 * keys, error shape, unknown routes.
 */
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { NodeMetrics, type MetricSources } from "../metrics/node-metrics.ts";
import { requireApiKey } from "./api-keys.ts";
import { errorResponse, respondToError } from "./errors.ts";
import { managementRoutes } from "./management.ts";
import { requestMetrics, scrapeMetrics } from "./metrics.ts";
import { openAiRoutes } from "./openai.ts";
import type { Serving } from "./serving.ts";

export interface AppOptions {
  maxBodyBytes: number;
  /** `llamacpp_backend` values a load may ask for. */
  backends: readonly string[];
  /** Keys `/v1` and `/api` require; none: open. */
  apiKeys: readonly string[];
  /** What `/metrics` reads from the mesh when scraped (peers, tunnels); the pool comes from `serving`. */
  meshMetrics?: Omit<MetricSources, "pool">;
}

export function createApp(serving: Serving, opts: AppOptions): Hono {
  const app = new Hono();
  const metrics = new NodeMetrics({ pool: serving.pool, ...opts.meshMetrics });
  const { count, observer } = requestMetrics(metrics);
  // First, so requests the body limit or the API keys refuse are counted too.
  app.use("/v1/*", count);
  app.use(
    "*",
    bodyLimit({
      maxSize: opts.maxBodyBytes,
      onError: (c) => errorResponse(c, 413, `request body is larger than the limit of ${opts.maxBodyBytes} bytes (--max-body-size)`, "invalid_request_error", "body_too_large"),
    }),
  );
  app.get("/health", (c) => c.json({ status: "ok" }));
  // Open like /health: scrapers carry no API key; it tells counts and timings, never content.
  app.get("/metrics", scrapeMetrics(metrics));
  app.use("/v1/*", requireApiKey(opts.apiKeys));
  app.use("/api/*", requireApiKey(opts.apiKeys));
  app.get("/api/status", (c) => c.json({ version: serving.version, ...serving.mesh.status() }));
  app.route("/v1", openAiRoutes(serving, observer));
  app.route("/api/v1", managementRoutes(serving, opts.backends));
  app.notFound((c) => errorResponse(c, 404, `no route for ${c.req.method} ${c.req.path}`, "not_found_error", "not_found"));
  app.onError((err, c) => respondToError(c, err));
  return app;
}
