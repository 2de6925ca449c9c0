/**
 * The answer to a request no route took: 405 with `Allow` when the path is known and only the
 * method is wrong (so a client learns its mistake), 404 otherwise; in the shape of the API the
 * path belongs to: Lemonade's under its base URLs (`/api/v1`, `/api/v0`, `/v0`), Ollama's string on its routes (`errorResponse`
 * switches), OpenAI's elsewhere.
 */
import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { errorResponse } from "../http/errors.ts";
import { lemonadeErrorResponse } from "./lemonade.ts";
import { allowedMethods, LEMONADE_BASES } from "../http/route-table.ts";

/** Whether `path` is under one of the management API's base URLs, whose errors take Lemonade's shape (pure). */
export const isManagementPath = (path: string): boolean => LEMONADE_BASES.some((base) => path === base || path.startsWith(`${base}/`));

export function noRoute(c: Context): Response {
  const fail = (status: ContentfulStatusCode, message: string, type: string, code: string) =>
    isManagementPath(c.req.path) ? lemonadeErrorResponse(c, status, message, type, code) : errorResponse(c, status, message, type, code);
  const allowed = allowedMethods(c.req.path);
  if (!allowed) return fail(404, `no route for ${c.req.method} ${c.req.path}`, "not_found_error", "not_found");
  c.header("Allow", allowed.join(", "));
  return fail(405, `${c.req.method} is not allowed on ${c.req.path}; allowed: ${allowed.join(", ")}`, "invalid_request_error", "method_not_allowed");
}
