/**
 * Ollama's `/api/pull`, `/api/delete` and `/api/copy` over the node's model admin. A pull takes Ollama's
 * `model` (or the older `name`) as a reference (`hf.co/org/repo:Q4_K_M`, `org/repo:QUANT`, a URL,
 * a catalog id) and names the model as typed, so `ollama run` with the same words finds it. It
 * streams NDJSON progress unless `stream` is false (Ollama's default is to stream), and ends with
 * `{"status":"success"}` or, once streaming, a last `{"error": "..."}` line. A delete removes only
 * what mesh downloaded into its own models dir (200 with no body, as Ollama answers).
 */
import type { Context, Hono } from "hono";
import { z } from "zod";
import { pullErrorToAdmin, type AdminError } from "../../node/model-admin.ts";
import { httpStatusOf, MAX_NAME, readJsonBody } from "./model-file-requests.ts";
import { modelName } from "./ollama-mapping.ts";
import { ndjsonLine, ollamaPullError, ollamaPullProgress, ollamaPullStart, ollamaPullSuccess } from "./pull-events.ts";
import { pullWhole, startPull, type PullRender } from "./pull-session.ts";
import type { Serving } from "../serving/serving.ts";

const PullBody = z.object({
  model: z.string().max(MAX_NAME).optional(),
  name: z.string().max(MAX_NAME).optional(),
  stream: z.boolean().optional(),
  insecure: z.boolean().optional(),
});

const DeleteBody = z.object({ model: z.string().max(MAX_NAME).optional(), name: z.string().max(MAX_NAME).optional() });
const CopyBody = z.object({ source: z.string().max(MAX_NAME).optional(), destination: z.string().max(MAX_NAME).optional() });

const fail = (c: Context, e: AdminError) => {
  if (e.status === 429) c.header("Retry-After", "10");
  return c.json({ error: e.message }, httpStatusOf(e));
};

const NDJSON_HEADERS = { "content-type": "application/x-ndjson" };

const RENDER: PullRender = {
  start: () => ndjsonLine(ollamaPullStart()),
  progress: (p) => ndjsonLine(ollamaPullProgress(p)),
  done: () => ndjsonLine(ollamaPullSuccess()),
  failed: (e) => ndjsonLine(ollamaPullError(e.message)),
  // A line like the last one: Ollama's clients read every line as a status.
  keepAlive: (last) => ndjsonLine(last ? ollamaPullProgress(last) : ollamaPullStart()),
};

export function ollamaModelFileRoutes(api: Hono, serving: Serving, keepAliveMs: number): void {
  const noAdmin = (c: Context) => c.json({ error: "this node does not pull or delete models" }, 503);

  api.post("/pull", async (c) => {
    const b = await readJsonBody(c, PullBody);
    if (!b.ok) return c.json({ error: b.error }, 400);
    const raw = b.value.model ?? b.value.name;
    if (!raw) return c.json({ error: '"model" is required' }, 400);
    if (!serving.admin) return noAdmin(c);
    // `x:latest` is what Ollama's tools send for a bare `x`.
    const ref = modelName(raw.trim());
    if (b.value.stream === false) {
      const r = await pullWhole(serving.admin, ref, undefined, c.req.raw.signal);
      return r.ok ? c.json({ status: "success" }) : fail(c, r.error);
    }
    const started = await startPull(serving.admin, ref, undefined, c.req.raw.signal, { keepAliveMs });
    if (started.settled) {
      if (!started.ok) return fail(c, started.error);
      return new Response(`${RENDER.start()}${RENDER.done(started.pulled)}`, { headers: NDJSON_HEADERS });
    }
    return new Response(started.stream(RENDER), { headers: NDJSON_HEADERS });
  });

  // Ollama's client sends DELETE with a JSON body; POST is taken too.
  api.on(["DELETE", "POST"], "/delete", async (c) => {
    const b = await readJsonBody(c, DeleteBody);
    if (!b.ok) return c.json({ error: b.error }, 400);
    const raw = b.value.model ?? b.value.name;
    if (!raw) return c.json({ error: '"model" is required' }, 400);
    if (!serving.admin) return noAdmin(c);
    try {
      await serving.admin.remove(modelName(raw));
    } catch (err) {
      return fail(c, pullErrorToAdmin(err));
    }
    return c.body(null, 200);
  });

  // A second name for a model on this node's disk: its files hard-linked under the new name.
  api.post("/copy", async (c) => {
    const b = await readJsonBody(c, CopyBody);
    if (!b.ok) return c.json({ error: b.error }, 400);
    const { source, destination } = b.value;
    if (!source || !destination) return c.json({ error: '"source" and "destination" are required' }, 400);
    if (!serving.admin) return noAdmin(c);
    // A name the node or the mesh already knows would be shadowed by the new file, not replaced.
    const dest = modelName(destination);
    if ((await serving.localModel(dest)) || serving.meshEntry(dest)) return c.json({ error: `a model named '${destination}' already exists in the mesh; choose another name` }, 409);
    try {
      await serving.admin.copy(modelName(source), dest);
    } catch (err) {
      return fail(c, pullErrorToAdmin(err));
    }
    return c.body(null, 200);
  });
}
