/**
 * The node's HTTP API as a Hono app: the OpenAI-compatible `/v1`, the management `/api`, and
 * `/health`. Errors leave in OpenAI's shape so every client library can read them.
 */
import { Hono } from "hono";

export function openAiError(message: string, type: string, code: string | null = null) {
  return { error: { message, type, code } };
}

export function createApp(): Hono {
  const app = new Hono();
  app.get("/health", (c) => c.json({ status: "ok" }));
  app.notFound((c) => c.json(openAiError(`no route for ${c.req.method} ${c.req.path}`, "not_found_error", "not_found"), 404));
  app.onError((err, c) => c.json(openAiError(err.message, "server_error"), 500));
  return app;
}
