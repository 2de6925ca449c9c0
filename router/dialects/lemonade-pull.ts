/**
 * Lemonade's `/api/v1/pull` and `/api/v1/delete` over the node's model admin. A pull names the
 * model with `model_name` (or `model`) and where it comes from with `checkpoint` (Lemonade's
 * `org/repo:QUANT`, or any reference mesh takes); without a checkpoint the name is the reference
 * itself (a catalog id, `org/repo:QUANT`, a URL). With `stream: true` progress comes as Lemonade's
 * server-sent events (`progress`, then `complete`, or `error` whose data carries `error`);
 * without, one JSON answer once the pull is done. Failures take Lemonade's error shape.
 */
import type { Context, Hono } from "hono";
import { z } from "zod";
import { pullErrorToAdmin, type AdminError } from "../../node/model-admin.ts";
import { lemonadeBadRequest, lemonadeErrorResponse } from "./lemonade.ts";
import { httpStatusOf, MAX_NAME, readJsonBody } from "./model-file-requests.ts";
import { lemonadeComplete, lemonadeErrorEvent, lemonadeProgress, sseEvent } from "./pull-events.ts";
import { pullWhole, startPull, type PullRender } from "./pull-session.ts";
import type { Serving } from "../serving/serving.ts";

const PullRequest = z.object({
  model_name: z.string().min(1).max(MAX_NAME).optional(),
  model: z.string().min(1).max(MAX_NAME).optional(),
  checkpoint: z.string().min(1).max(MAX_NAME).optional(),
  stream: z.boolean().optional(),
});

const DeleteRequest = z.object({ model_name: z.string().min(1).max(MAX_NAME).optional(), model: z.string().min(1).max(MAX_NAME).optional() });

/** The OpenAI-style `type` beside each status. */
const ERROR_TYPES: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  409: "conflict_error",
  429: "rate_limit_error",
  502: "upstream_error",
  503: "service_unavailable",
  507: "insufficient_storage",
};

function lemonadeAdminError(c: Context, e: AdminError): Response {
  const status = httpStatusOf(e);
  return lemonadeErrorResponse(c, status, e.message, ERROR_TYPES[status] ?? "server_error", e.code, e.status === 429 ? 10 : undefined);
}

const SSE_HEADERS = { "content-type": "text/event-stream", "cache-control": "no-cache" };

const RENDER: PullRender = {
  start: () => ": pulling\n\n",
  progress: (p) => sseEvent(lemonadeProgress(p)),
  done: (pulled) => sseEvent(lemonadeComplete(pulled)),
  failed: (e) => sseEvent(lemonadeErrorEvent(e.message, e.code)),
  keepAlive: () => ": keep-alive\n\n",
};

export function lemonadeModelFileRoutes(api: Hono, serving: Serving, keepAliveMs: number): void {
  const noAdmin = (c: Context) => lemonadeErrorResponse(c, 503, "this node does not pull or delete models", "service_unavailable", "no_model_admin");

  api.post("/pull", async (c) => {
    const b = await readJsonBody(c, PullRequest);
    if (!b.ok) return lemonadeBadRequest(c, b.error, "invalid_body");
    const given = b.value.model_name ?? b.value.model;
    if (!given) return lemonadeBadRequest(c, 'invalid pull request: "model_name" is required', "invalid_body");
    if (!serving.admin) return noAdmin(c);
    // With a checkpoint, model_name is the name it gets; without, it is the reference itself.
    const [ref, name] = b.value.checkpoint ? [b.value.checkpoint, given] : [given, undefined];
    if (!b.value.stream) {
      const r = await pullWhole(serving.admin, ref, name, c.req.raw.signal);
      if (!r.ok) return lemonadeAdminError(c, r.error);
      return c.json({ status: "success", model_name: r.pulled.name, message: `${r.pulled.alreadyHad ? "Already installed" : "Installed"} model: ${r.pulled.name}` });
    }
    const started = await startPull(serving.admin, ref, name, c.req.raw.signal, { keepAliveMs });
    if (started.settled) {
      if (!started.ok) return lemonadeAdminError(c, started.error);
      return new Response(`${RENDER.start()}${RENDER.done(started.pulled)}`, { headers: SSE_HEADERS });
    }
    return new Response(started.stream(RENDER), { headers: SSE_HEADERS });
  });

  api.post("/delete", async (c) => {
    const b = await readJsonBody(c, DeleteRequest);
    if (!b.ok) return lemonadeBadRequest(c, b.error, "invalid_body");
    const name = b.value.model_name ?? b.value.model;
    if (!name) return lemonadeBadRequest(c, 'invalid delete request: "model_name" is required', "invalid_body");
    if (!serving.admin) return noAdmin(c);
    try {
      const removed = await serving.admin.remove(name);
      return c.json({ status: "success", message: `Deleted model: ${removed.name}`, files: removed.files, kept: removed.kept });
    } catch (err) {
      return lemonadeAdminError(c, pullErrorToAdmin(err));
    }
  });
}
