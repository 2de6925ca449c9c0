/**
 * The OpenAI routes again under `/api/v1`, Lemonade's base URL (an OpenAI client with `baseURL`
 * `.../api/v1` lists models and chats), and under its other bases (`/api/v0`, `/v0`) alike. The
 * same routes answer them as `/v1` (`openAiRoutes` mounted there with `fallThrough`, so every
 * other path goes on to the management routes): the mesh forwards such a request to a peer under
 * the `/v1` path the peer's member allowlist knows, and the metrics count it under that route.
 */
import type { MiddlewareHandler } from "hono";
import { INFERENCE_ROUTES } from "../http/route-table.ts";

export const API_V1 = "/api/v1";

/** Whether `METHOD /api/v1{rest}` is an OpenAI route (pure): the model list, a model, an inference route. */
export function isOpenAiRoute(method: string, rest: string): boolean {
  if (method === "GET" || method === "HEAD") return rest === "/models" || (rest.startsWith("/models/") && rest.length > "/models/".length);
  return method === "POST" && Object.hasOwn(INFERENCE_ROUTES, rest);
}

/**
 * Counts a request for an OpenAI route under `base` as the `/v1` route it is (`countAs`: the request
 * metrics'); the management routes beside them are not counted.
 */
export function countedAsV1(countAs: (path: string) => MiddlewareHandler, base = API_V1): MiddlewareHandler {
  return async (c, next) => {
    const rest = c.req.path.slice(base.length);
    if (!c.req.path.startsWith(`${base}/`) || !isOpenAiRoute(c.req.method, rest)) return next();
    return countAs(`/v1${rest}`)(c, next);
  };
}
