/**
 * The OpenAI routes again under `/api/v1`, Lemonade's base URL (an OpenAI client with `baseURL`
 * `.../api/v1` lists models and chats), and under its other bases (`/api/v0`, `/v0`) alike. A request for one of them is answered by the same `/v1`
 * routes as if it had come for `/v1/...`, so the mesh forwards it to a peer under the path the
 * peer's member allowlist knows, and the metrics count it under the same route. Every other
 * `/api/v1` path goes on to the management routes. The outer app has already applied the browser
 * guard, the API key and the body limit, and read the body.
 */
import type { Hono, MiddlewareHandler } from "hono";
import { keepKeyAccepted } from "../http/api-keys.ts";
import { inProcessV1 } from "../http/in-process.ts";
import { INFERENCE_ROUTES } from "./openai.ts";

export const API_V1 = "/api/v1";

/** Whether `METHOD /api/v1{rest}` is an OpenAI route (pure): the model list, a model, an inference route. */
export function isOpenAiRoute(method: string, rest: string): boolean {
  if (method === "GET" || method === "HEAD") return rest === "/models" || (rest.startsWith("/models/") && rest.length > "/models/".length);
  return method === "POST" && Object.hasOwn(INFERENCE_ROUTES, rest);
}

/**
 * @param openAi the `/v1` routes (`openAiRoutes`)
 * @param count the request metrics middleware `/v1` is counted with
 * @param base the Lemonade base URL it is mounted under (`LEMONADE_BASES`)
 */
export function openAiUnderApi<E extends { Bindings: object }>(openAi: Hono, count: MiddlewareHandler, base = API_V1): MiddlewareHandler<E> {
  const inner = inProcessV1(openAi, count);
  return async (c, next) => {
    const rest = c.req.path.slice(base.length);
    if (!c.req.path.startsWith(`${base}/`) || !isOpenAiRoute(c.req.method, rest)) return next();
    const url = new URL(c.req.url);
    url.pathname = `/v1${rest}`;
    // The body was read whole already (the limit held it); it is handed on as those bytes.
    const body = c.req.method === "GET" || c.req.method === "HEAD" ? undefined : await c.req.arrayBuffer();
    const req = new Request(url.href, { method: c.req.method, headers: c.req.raw.headers, body, signal: c.req.raw.signal });
    keepKeyAccepted(c.req.raw.headers, req.headers);
    return inner(req, c.env);
  };
}
