/** OpenAI-shaped errors, the one shape every response of ours that is not a success takes (on Ollama's routes, its own). */
import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { PoolError } from "../../pool/errors.ts";
import { isOllamaPath } from "./route-table.ts";

export function openAiError(message: string, type: string, code: string | null = null) {
  return { error: { message, type, code } };
}

export function errorResponse(c: Context, status: ContentfulStatusCode, message: string, type: string, code: string | null = null, retryAfter?: number) {
  if (retryAfter !== undefined) c.header("Retry-After", String(retryAfter));
  // Refusals that come before a route (browser guard, keys, body limit) reach Ollama's clients too.
  if (isOllamaPath(c.req.path)) return c.json({ error: message }, status);
  return c.json(openAiError(message, type, code), status);
}

export const badRequest = (c: Context, message: string, code: string | null = null) => errorResponse(c, 400, message, "invalid_request_error", code);

/** Maps anything thrown by a handler to its response; pool errors carry their status. */
export function respondToError(c: Context, err: unknown) {
  if (err instanceof PoolError) return errorResponse(c, err.status, err.message, err.type, err.code, err.retryAfter);
  const message = err instanceof Error ? err.message : String(err);
  return errorResponse(c, 500, message, "server_error");
}
