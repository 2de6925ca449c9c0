/**
 * The `/v1` routes served in-process, for routes that answer through them (Lemonade's `/api/v1`
 * base URL, Ollama's adapter): a request of its own, counted by the request metrics like one that
 * came for `/v1` (under the route its middleware names), with errors in their OpenAI shape and
 * the status they carry.
 */
import { Hono, type MiddlewareHandler } from "hono";
import { respondToError } from "./errors.ts";

/** Serves a request for `/v1/...`; `env` is the outer request's bindings (none in-process). */
export type InProcessV1 = (req: Request, env?: object) => Promise<Response>;

/**
 * @param openAi the `/v1` routes (`openAiRoutes`)
 * @param count the request metrics middleware the request is counted with
 */
export function inProcessV1(openAi: Hono, count: MiddlewareHandler): InProcessV1 {
  const inner = new Hono();
  inner.use("*", count);
  inner.route("/v1", openAi);
  inner.onError((err, c) => respondToError(c, err));
  return (req, env) => Promise.resolve(inner.fetch(req, env));
}
