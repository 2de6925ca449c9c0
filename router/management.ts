/**
 * The management API under `/api/v1`, shaped like Lemonade's so its clients and scripts work:
 * health with every loaded server, stats of the last request, load and unload.
 */
import { Hono } from "hono";
import { z } from "zod";
import { MODEL_TYPES } from "../models/model-type.ts";
import { deviceNames } from "../pool/devices.ts";
import { badRequest, errorResponse } from "./errors.ts";
import { findModel, type Serving } from "./serving.ts";

const LoadRequest = z.object({
  model_name: z.string().min(1),
  ctx_size: z.number().int().nonnegative().optional(),
  llamacpp_args: z.string().optional(),
  llamacpp_backend: z.string().min(1).optional(),
  pinned: z.boolean().optional(),
});

const UnloadRequest = z.object({ model_name: z.string().min(1).optional() });

async function jsonBody(c: { req: { text(): Promise<string> } }): Promise<{ ok: true; value: unknown } | { ok: false; error: string }> {
  const text = await c.req.text();
  if (text.trim() === "") return { ok: true, value: {} };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (err) {
    return { ok: false, error: `request body is not valid JSON: ${(err as Error).message}` };
  }
}

export function managementRoutes(serving: Serving, backends: readonly string[]): Hono {
  const api = new Hono();

  api.get("/health", (c) => {
    const servers = serving.pool.loaded();
    const last = serving.pool.lastLoaded ? serving.pool.server(serving.pool.lastLoaded) : undefined;
    return c.json({
      status: "ok",
      version: serving.version,
      model_loaded: last?.model ?? null,
      checkpoint_loaded: last?.checkpoint ?? null,
      all_models_loaded: servers.map((s) => ({
        model_name: s.model,
        checkpoint: s.checkpoint,
        last_use: s.lastUse / 1000,
        type: s.type,
        device: deviceNames(s.devices).join(","),
        recipe: s.recipe,
        pinned: s.pinned,
        is_busy: s.busy,
        state: s.draining ? "draining" : s.state,
        backend_url: s.url,
        rpc_workers: s.rpcWorkers,
        pid: s.pid,
      })),
      max_models: Object.fromEntries(MODEL_TYPES.map((t) => [t, serving.pool.limit])),
    });
  });

  api.get("/stats", (c) => {
    const s = serving.lastStats?.();
    if (!s) return c.json({ time_to_first_token: null, tokens_per_second: null, input_tokens: null, output_tokens: null });
    return c.json(s);
  });

  api.get("/models", async (c) => c.redirect("/v1/models", 307));

  api.post("/load", async (c) => {
    const body = await jsonBody(c);
    if (!body.ok) return badRequest(c, body.error, "invalid_body");
    const parsed = LoadRequest.safeParse(body.value);
    if (!parsed.success) return badRequest(c, `invalid load request: ${z.prettifyError(parsed.error)}`, "invalid_body");
    const req = parsed.data;
    if (req.llamacpp_backend && !backends.includes(req.llamacpp_backend)) {
      return badRequest(c, `llamacpp_backend "${req.llamacpp_backend}" is not available on this node; available: ${backends.join(", ")}`, "invalid_backend");
    }
    const model = await findModel(serving, req.model_name);
    const server = await serving.pool.load(model, {
      ctxSize: req.ctx_size,
      llamacppArgs: req.llamacpp_args,
      pinned: req.pinned,
      backend: req.llamacpp_backend,
    });
    return c.json({ status: "success", message: `Loaded model: ${server.model}`, model_name: server.model, backend_url: server.url });
  });

  api.post("/unload", async (c) => {
    const body = await jsonBody(c);
    if (!body.ok) return badRequest(c, body.error, "invalid_body");
    const parsed = UnloadRequest.safeParse(body.value);
    if (!parsed.success) return badRequest(c, `invalid unload request: ${z.prettifyError(parsed.error)}`, "invalid_body");
    const unloaded = await serving.pool.unload(parsed.data.model_name);
    return c.json({ status: "success", message: `Unloaded ${unloaded.length ? unloaded.join(", ") : "nothing"}`, unloaded });
  });

  api.all("*", (c) => errorResponse(c, 404, `no route for ${c.req.method} ${c.req.path}`, "not_found_error", "not_found"));
  return api;
}
