/**
 * Lemonade's words on the management API (`/api/v1` load, unload, pull, delete, ...): its error
 * shape and what its `ctx_size: -1` means here.
 * Lemonade's clients read `status` and `message` of a failed management call; the `error` object
 * beside them is OpenAI's, so a client of either kind finds what it looks for.
 */
import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { PoolError } from "../../pool/errors.ts";

export interface LemonadeError {
  status: "error";
  message: string;
  error: { message: string; type: string; code: string | null };
}

export function lemonadeError(message: string, type: string, code: string | null = null): LemonadeError {
  return { status: "error", message, error: { message, type, code } };
}

export function lemonadeErrorResponse(c: Context, status: ContentfulStatusCode, message: string, type: string, code: string | null = null, retryAfter?: number) {
  if (retryAfter !== undefined) c.header("Retry-After", String(retryAfter));
  return c.json(lemonadeError(message, type, code), status);
}

export const lemonadeBadRequest = (c: Context, message: string, code: string | null = null) => lemonadeErrorResponse(c, 400, message, "invalid_request_error", code);

/** The management API's `onError`: pool errors keep their status, anything else is a 500. */
export function respondWithLemonadeError(err: unknown, c: Context) {
  if (err instanceof PoolError) return lemonadeErrorResponse(c, err.status, err.message, err.type, err.code, err.retryAfter);
  return lemonadeErrorResponse(c, 500, err instanceof Error ? err.message : String(err), "server_error");
}

/**
 * A load's `ctx_size` as the pool takes it. Lemonade's -1 says "size it yourself, not a saved
 * value"; our 0 is llama-server's "the model's own context length", the nearest thing we have.
 */
export function loadCtxSize(ctxSize: number | undefined): number | undefined {
  return ctxSize === -1 ? 0 : ctxSize;
}
