/**
 * The management API under `/api/v1` (and Lemonade's other bases, `/api/v0` and `/v0`, mounted
 * alike in `app.ts`), shaped like Lemonade's so its clients and scripts work:
 * health with every loaded server, stats of the last request, system info, load and unload, and
 * pull and delete (`router/dialects/lemonade-pull.ts`). Its errors take Lemonade's shape (`router/dialects/lemonade.ts`).
 * The OpenAI routes under `/api/v1` (`models`, `chat/completions`, ...) are answered before these.
 */
import { Hono } from "hono";
import { z } from "zod";
import { chooseDraft, draftNameProblem } from "../../models/model-draft.ts";
import { MODEL_TYPES } from "../../models/model-type.ts";
import type { LlamaDevice } from "../../llama/devices.ts";
import { deviceNames } from "../../models/recipe-devices.ts";
import type { LoadOptions } from "../../pool/pool-types.ts";
import { MAX_REQUEST_ARGS_CHARS, parseRequestArgs } from "../../pool/request-args.ts";
import { lemonadeBadRequest as badRequest, loadCtxSize, respondWithLemonadeError } from "./lemonade.ts";
import { lemonadeModelFileRoutes } from "./lemonade-pull.ts";
import { KEEP_ALIVE_MS } from "../serving/proxy.ts";
import type { Serving } from "../serving/serving.ts";
import { hostFacts, systemInfo } from "./system-info.ts";

const LoadRequest = z.object({
  model_name: z.string().min(1),
  // -1: Lemonade's "size it automatically"; 0 and -1 both get the model's own context.
  ctx_size: z.number().int().min(-1).max(2 ** 24).optional(),
  llamacpp_args: z.string().max(MAX_REQUEST_ARGS_CHARS).optional(),
  llamacpp_backend: z.string().min(1).optional(),
  pinned: z.boolean().optional(),
  /** A model of this node, by name, that drafts for this one (speculative decoding); not a Lemonade field. */
  draft_model: z.string().min(1).max(512).optional(),
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

export interface ManagementOptions {
  /** `llamacpp_backend` values a load may ask for. */
  backends: readonly string[];
  /** The build's accelerators, for system-info. */
  devices: readonly LlamaDevice[];
  /** Silence after which a pull's event stream gets a keep-alive comment. */
  keepAliveMs?: number;
}

/** Lemonade's `recipe_options`: what the load asked for, with the context the server runs with. */
function recipeOptions(o: LoadOptions | undefined, ctxSize: number): Record<string, string | number> {
  return {
    ctx_size: ctxSize,
    ...(o?.requestArgs?.length ? { llamacpp_args: o.requestArgs.join(" ") } : {}),
    ...(o?.backend ? { llamacpp_backend: o.backend } : {}),
    ...(o?.draftModel ? { draft_model: o.draftModel } : {}),
  };
}

export function managementRoutes(serving: Serving, { backends, devices, keepAliveMs = KEEP_ALIVE_MS }: ManagementOptions): Hono {
  const api = new Hono();
  api.onError(respondWithLemonadeError);

  api.get("/health", (c) => {
    const servers = serving.servers();
    const last = serving.lastLoaded();
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
        // Lemonade's list is space-separated ("gpu npu").
        device: deviceNames(s.devices).join(" "),
        recipe: s.recipe,
        pinned: s.pinned,
        is_busy: s.busy,
        state: s.state,
        backend_url: s.url,
        rpc_workers: s.rpcWorkers,
        pid: s.pid,
        recipe_options: recipeOptions(serving.loadOptionsOf(s), s.ctxSize),
      })),
      pinned_models: Object.fromEntries(MODEL_TYPES.map((t) => [t, servers.filter((s) => s.type === t && s.pinned).length])),
      max_models: Object.fromEntries(MODEL_TYPES.map((t) => [t, serving.maxLoaded])),
    });
  });

  api.get("/stats", (c) => {
    const s = serving.lastStats();
    if (!s) return c.json({ time_to_first_token: null, tokens_per_second: null, input_tokens: null, output_tokens: null });
    return c.json(s);
  });

  api.get("/system-info", (c) => c.json(systemInfo({ host: hostFacts(), devices, backends })));

  lemonadeModelFileRoutes(api, serving, keepAliveMs);

  api.post("/load", async (c) => {
    const body = await jsonBody(c);
    if (!body.ok) return badRequest(c, body.error, "invalid_body");
    const parsed = LoadRequest.safeParse(body.value);
    if (!parsed.success) return badRequest(c, `invalid load request: ${z.prettifyError(parsed.error)}`, "invalid_body");
    const req = parsed.data;
    // Held to the allowlist before anything else: this text would otherwise become llama-server's argv.
    const args = parseRequestArgs(req.llamacpp_args);
    if (!args.ok) return badRequest(c, args.error, "invalid_llamacpp_args");
    if (req.llamacpp_backend && !backends.includes(req.llamacpp_backend)) {
      return badRequest(c, `llamacpp_backend "${req.llamacpp_backend}" is not available on this node; available: ${backends.join(", ")}`, "invalid_backend");
    }
    const model = await serving.findModel(req.model_name);
    if (req.draft_model !== undefined) {
      // Answered here, not after the loads queued before this one: a draft is a model name this node lists.
      if (!draftNameProblem(req.draft_model)) await serving.localModel(req.draft_model);
      const draft = chooseDraft(model, req.draft_model, serving.localModels());
      if (!draft.ok) return badRequest(c, draft.error, "invalid_draft_model");
    }
    const server = await serving.load(model, {
      ctxSize: loadCtxSize(req.ctx_size),
      requestArgs: args.args,
      pinned: req.pinned,
      backend: req.llamacpp_backend,
      draftModel: req.draft_model,
    });
    return c.json({ status: "success", message: `Loaded model: ${server.model}`, model_name: server.model, backend_url: server.url });
  });

  // No body (Lemonade's "unload all"; the browser guard lets it come without a type): every model
  // loaded here, pinned ones too, as an unload naming a pinned model unloads it.
  api.post("/unload", async (c) => {
    const body = await jsonBody(c);
    if (!body.ok) return badRequest(c, body.error, "invalid_body");
    const parsed = UnloadRequest.safeParse(body.value);
    if (!parsed.success) return badRequest(c, `invalid unload request: ${z.prettifyError(parsed.error)}`, "invalid_body");
    const unloaded = await serving.unload(parsed.data.model_name);
    return c.json({ status: "success", message: `Unloaded ${unloaded.length ? unloaded.join(", ") : "nothing"}`, unloaded });
  });

  // What no route here takes goes on to the app's `noRoute`: 405 with `Allow` for a wrong method, 404 otherwise.
  return api;
}
