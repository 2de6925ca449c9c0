/**
 * The node's HTTP API as one Hono app: `/health`, the OpenAI-compatible `/v1`, the management
 * `/api/v1`. Cross-cutting rules live here once: body size limit, error shape, unknown routes.
 */
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { requireApiKey } from "./api-keys.ts";
import { errorResponse, respondToError } from "./errors.ts";
import { managementRoutes } from "./management.ts";
import { openAiRoutes } from "./openai.ts";
import type { Serving } from "./serving.ts";

export interface AppOptions {
  maxBodyBytes: number;
  /** `llamacpp_backend` values a load may ask for. */
  backends: readonly string[];
  /** Keys `/v1` and `/api` require; none: open. */
  apiKeys: readonly string[];
}

export function createApp(serving: Serving, opts: AppOptions): Hono {
  const app = new Hono();
  app.use(
    "*",
    bodyLimit({
      maxSize: opts.maxBodyBytes,
      onError: (c) => errorResponse(c, 413, `request body is larger than the limit of ${opts.maxBodyBytes} bytes (--max-body-size)`, "invalid_request_error", "body_too_large"),
    }),
  );
  app.get("/health", (c) => c.json({ status: "ok" }));
  app.use("/v1/*", requireApiKey(opts.apiKeys));
  app.use("/api/*", requireApiKey(opts.apiKeys));
  app.get("/api/status", (c) => c.json({ version: serving.version, ...serving.mesh.status() }));
  app.route("/v1", openAiRoutes(serving));
  app.route("/api/v1", managementRoutes(serving, opts.backends));
  app.notFound((c) => errorResponse(c, 404, `no route for ${c.req.method} ${c.req.path}`, "not_found_error", "not_found"));
  app.onError((err, c) => respondToError(c, err));
  return app;
}
