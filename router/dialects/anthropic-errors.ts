/**
 * Errors on Anthropic's routes in Anthropic's shape: `{"type":"error","error":{"type","message"}}`
 * with the type its SDKs name by status. Every error there (the node's own refusals, a peer's, or
 * llama-server's own) is reshaped on the way out, so the SDK's error says the message, not a JSON
 * dump of another API's error object.
 */
import type { MiddlewareHandler } from "hono";
import { isObject } from "../http/json.ts";
import { headersForNewBody, MAX_ERROR_BODY_BYTES, textWithin } from "../http/bounded-body.ts";

/** Anthropic's error type for an HTTP status (pure). */
export function anthropicErrorType(status: number): string {
  if (status === 400 || status === 405 || status === 415 || status === 422) return "invalid_request_error";
  if (status === 401) return "authentication_error";
  if (status === 403) return "permission_error";
  if (status === 404) return "not_found_error";
  if (status === 413) return "request_too_large";
  if (status === 429) return "rate_limit_error";
  if (status === 503 || status === 529) return "overloaded_error";
  return "api_error";
}

/**
 * An error body in Anthropic's shape (pure): the message of an OpenAI, llama-server or Ollama error,
 * or the text as it is; our own error code stays beside it (`code`, which the SDKs pass through), so
 * a client that branches on it still can.
 */
export function anthropicErrorBody(status: number, text: string): { type: "error"; error: { type: string; message: string; code?: string } } {
  let message = text;
  let code: string | undefined;
  try {
    const json: unknown = JSON.parse(text);
    if (isObject(json) && isObject(json.error) && typeof json.error.message === "string") {
      message = json.error.message;
      if (typeof json.error.code === "string") code = json.error.code;
    } else if (isObject(json) && typeof json.error === "string") message = json.error;
  } catch {
    // Not JSON: its text is the message.
  }
  return { type: "error", error: { type: anthropicErrorType(status), message, ...(code !== undefined ? { code } : {}) } };
}

/** Whether `path` is one of Anthropic's routes (also under Lemonade's bases). */
export const isAnthropicPath = (path: string): boolean => /^(?:\/api)?\/v[01]\/messages(?:\/count_tokens)?$/.test(path);

/** Reshapes every error answer of Anthropic's routes (mounted before anything that may refuse). */
export const anthropicErrors: MiddlewareHandler = async (c, next) => {
  await next();
  if (!isAnthropicPath(c.req.path) || c.res.status < 400) return;
  const res = c.res;
  // An error past the bound says so instead of what it said.
  const text = await textWithin(res, MAX_ERROR_BODY_BYTES).catch((err: unknown) => (err instanceof Error ? err.message : String(err)));
  const body = anthropicErrorBody(res.status, text);
  c.res = new Response(JSON.stringify(body), { status: res.status, headers: headersForNewBody(res, "application/json") });
};
