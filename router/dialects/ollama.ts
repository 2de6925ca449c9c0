/**
 * Ollama's API (`/api/version`, `/api/tags`, `/api/ps`, `/api/show`, `/api/chat`, `/api/generate`,
 * `/api/embed`, `/api/embeddings`; `/api/pull` and `/api/delete` in `ollama-pull.ts`) as a thin
 * translator over the one way into serving (`openAiInference`): each inference request is
 * translated (`ollama-mapping.ts`) into the OpenAI request it means and served by the same code as
 * `/v1` (model lookup, loading, routing to the peer that hosts the model, proxying), and the answer
 * is translated back: SSE to NDJSON in the answer's one tap (`stream-tap.ts`), JSON to Ollama's JSON. Members of the mesh forward only `/v1` routes, so a request
 * crosses the mesh in OpenAI's words, its `keep_alive` beside it for the node that answers
 * (`keep-alive.ts`). `/api/ps` lists the models loaded anywhere in the mesh, and `/api/show` and
 * `/api/tags` describe another node's model as its catalog entry does (what its holders announce).
 * Errors are Ollama's `{"error": "..."}` with the status `/v1` gave.
 */
import { Hono, type Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { CatalogModel } from "../../placement/catalog.ts";
import type { ModelInfo } from "../../models/model-store.ts";
import { PoolError } from "../../pool/errors.ts";
import { tapStream } from "../http/stream-tap.ts";
import type { OpenAiInference } from "./openai.ts";
import { keepAliveMs, mapChat, mapEmbed, mapGenerate, modelName, ollamaError, StreamTranslator, wholeAnswer, type AnswerKind, type JsonObject, type Mapped } from "./ollama-mapping.ts";
import { meshPsEntries, psEntry, psExpiries, psPeers, remoteShowAnswer, remoteTagsEntry, showAnswer, tagsEntry } from "./ollama-models.ts";
import { FORWARDED_HEADER } from "../../mesh/mesh-headers.ts";
import { ollamaModelFileRoutes } from "./ollama-pull.ts";
import { KEEP_ALIVE_MS } from "../serving/proxy.ts";
import type { Serving } from "../serving/serving.ts";
import { jsonWithin, MAX_ERROR_BODY_BYTES, MAX_REWRITTEN_ANSWER_BYTES, textWithin } from "../http/bounded-body.ts";

/**
 * Serves one OpenAI request (`path` under `/v1`) for the Ollama route `c`, with the request's
 * `keep_alive` in ms (undefined: none given), which the node that answers applies.
 */
type OpenAiCall = (c: Context, path: string, body: JsonObject, keepAliveMs: number | undefined) => Promise<Response>;

const encoder = new TextEncoder();

const openAiCall =
  (infer: OpenAiInference): OpenAiCall =>
  (c, path, body, keepAliveMs) =>
    infer(c, { path: `/v1${path}`, body: encoder.encode(JSON.stringify(body)).buffer as ArrayBuffer, keepAlive: { ms: keepAliveMs } });

/** Routes of Ollama's that make or publish models, which this node does not do: a clear error each. */
const OLLAMA_ERRORS = {
  create: "creating models is not supported; put GGUF files in --models-dir, or pull one (mesh pull, POST /api/pull)",
  push: "pushing models is not supported",
} as const;

const ollamaFail = (c: Context, status: ContentfulStatusCode, error: string) => c.json({ error }, status);

const mtimeOf = (m: ModelInfo): number => m.modifiedMs ?? 0;
/** Members a `/api/ps` asks when their models unload: each is asked at once, within `PEER_LOADED_MS`. */
const MAX_PS_PEERS = 32;

async function jsonBody(c: Context): Promise<unknown> {
  try {
    return JSON.parse(await c.req.text()) as unknown;
  } catch {
    return undefined;
  }
}

async function errorOf(c: Context, res: Response): Promise<Response> {
  const body = await jsonWithin(res, MAX_ERROR_BODY_BYTES).catch(() => undefined);
  return ollamaFail(c, res.status as ContentfulStatusCode, ollamaError(body, `request failed with status ${res.status}`).error as string);
}

async function answer(c: Context, call: OpenAiCall, kind: AnswerKind, mapped: Mapped, keepAliveMs: number | undefined): Promise<Response> {
  if (!mapped.ok) return ollamaFail(c, 400, mapped.error);
  const started = performance.now();
  // Its keep_alive is applied by the node that answers, once the answer is complete (`keep-alive.ts`).
  const res = await call(c, mapped.path, mapped.body, keepAliveMs);
  if (!res.ok) return errorOf(c, res);
  const isSse = (res.headers.get("content-type") ?? "").includes("text/event-stream");
  if (!mapped.stream || !isSse || !res.body) {
    const whole = wholeAnswer(kind, mapped.model, JSON.parse(await textWithin(res, MAX_REWRITTEN_ANSWER_BYTES)) as unknown, performance.now() - started, new Date());
    if (!mapped.stream) return c.json(whole);
    return new Response(`${JSON.stringify(whole)}\n`, { headers: { "content-type": "application/x-ndjson" } });
  }
  const translator = new StreamTranslator(kind, mapped.model);
  const decoder = new TextDecoder();
  // Hooks on the answer's one tap, after the proxy's and the guard's: a broken stream has been
  // ended with an error event by then, which is translated like any other.
  const stream = tapStream(res.body, {
    onChunk: (chunk) => {
      const lines = translator.push(decoder.decode(chunk, { stream: true }), new Date());
      return lines.length ? encoder.encode(lines.join("")) : [];
    },
    onEnd: () => ({ add: encoder.encode(translator.close(new Date(), performance.now() - started)), end: { done: true } }),
  });
  return new Response(stream, { headers: { "content-type": "application/x-ndjson" } });
}

/** The model a show/tags request names: on this node, or only elsewhere in the mesh. */
async function describe(serving: Serving, name: string): Promise<{ local: ModelInfo } | { remote: CatalogModel } | undefined> {
  const local = await serving.localModel(name);
  if (local) return { local };
  const remote = serving.meshEntry(name);
  return remote ? { remote } : undefined;
}

export function ollamaRoutes(serving: Serving, infer: OpenAiInference, keepAliveMs = KEEP_ALIVE_MS): Hono {
  const api = new Hono();
  const call = openAiCall(infer);

  // Ours is the mesh's version, which Ollama clients only display.
  api.get("/version", (c) => c.json({ version: serving.version }));

  api.get("/tags", async (c) => {
    const models = await serving.refreshModels();
    const local = new Set(models.map((m) => m.name));
    const remote = serving.catalog().filter((m) => !local.has(m.name)).map(remoteTagsEntry);
    return c.json({ models: [...models.map((m) => tagsEntry(m, mtimeOf(m))), ...remote] });
  });

  // The mesh's loaded models: this node's own, then those other nodes serve (`meshPsEntries`).
  api.get("/ps", async (c) => {
    const models = [];
    const here = new Set<string>();
    const self = serving.nodeId();
    for (const s of serving.loadedServers()) {
      const m = await serving.localModel(s.model);
      if (!m) continue;
      models.push(psEntry(m, mtimeOf(m), s.lastUse, serving.idleUnloadMsOf(s.model), self));
      here.add(s.model);
    }
    // When another node's model unloads is that node's word: asked of it, unless this request came from a member (it asks no further).
    const catalog = serving.catalog();
    const expiries = new Map<string, string>();
    if (c.req.header(FORWARDED_HEADER) === undefined) {
      const peers = psPeers(catalog, here, self).slice(0, MAX_PS_PEERS);
      await Promise.all(peers.map(async (peer) => psExpiries(peer, await serving.loadedOn(peer), expiries)));
    }
    return c.json({ models: [...models, ...meshPsEntries(catalog, here, self, expiries)] });
  });

  api.post("/show", async (c) => {
    const body = await jsonBody(c);
    const raw = typeof body === "object" && body !== null ? ((body as { model?: unknown; name?: unknown }).model ?? (body as { name?: unknown }).name) : undefined;
    if (typeof raw !== "string" || raw === "") return ollamaFail(c, 400, '"model" is required');
    const name = modelName(raw);
    const found = await describe(serving, name);
    if (!found) return ollamaFail(c, 404, `model '${raw}' not found`);
    if ("remote" in found) return c.json(remoteShowAnswer(found.remote));
    return c.json(showAnswer(found.local, mtimeOf(found.local)));
  });

  api.post("/chat", async (c) => {
    const body = await jsonBody(c);
    return answer(c, call, "chat", mapChat(body), keepAliveMsOf(body));
  });

  api.post("/generate", async (c) => {
    const body = await jsonBody(c);
    const mapped = mapGenerate(body);
    // Ollama loads a model for a generate request with no prompt or an empty one (and unloads it with keep_alive 0: `ollama stop`).
    const prompt = typeof body === "object" && body !== null ? (body as { prompt?: unknown }).prompt : undefined;
    if (mapped.ok && (prompt === undefined || prompt === "")) return preload(c, serving, call, mapped.model, keepAliveMsOf(body));
    return answer(c, call, "generate", mapped, keepAliveMsOf(body));
  });

  for (const [route, legacy] of [["/embed", false], ["/embeddings", true]] as const) {
    api.post(route, async (c) => {
      const body = await jsonBody(c);
      const mapped = mapEmbed(body, legacy);
      if (!mapped.ok) return ollamaFail(c, 400, mapped.error);
      const started = performance.now();
      const res = await call(c, mapped.path, mapped.body, keepAliveMsOf(body));
      if (!res.ok) return errorOf(c, res);
      const data = (JSON.parse(await textWithin(res, MAX_REWRITTEN_ANSWER_BYTES)) as { data?: { embedding: number[] }[]; usage?: { prompt_tokens?: number } } | null) ?? {};
      const vectors = (data.data ?? []).map((d) => d.embedding);
      if (legacy) return c.json({ embedding: vectors[0] ?? [] });
      const ns = Math.round((performance.now() - started) * 1e6);
      return c.json({ model: mapped.model, embeddings: vectors, total_duration: ns, load_duration: 0, prompt_eval_count: data.usage?.prompt_tokens ?? 0 });
    });
  }

  ollamaModelFileRoutes(api, serving, keepAliveMs);
  for (const [route, message] of Object.entries(OLLAMA_ERRORS)) {
    // Ollama answers 501-like failures with its error shape.
    api.on(["POST", "DELETE"], `/${route}`, (c) => ollamaFail(c, 501, message));
  }
  // Ollama's shape for what the pool throws (unknown model: 404), with the status it carries.
  api.onError((err, c) => (err instanceof PoolError ? ollamaFail(c, err.status, err.message) : ollamaFail(c, 500, err.message)));
  return api;
}

/** The request's `keep_alive` in ms; undefined when it gave none (or none readable). */
function keepAliveMsOf(body: unknown): number | undefined {
  return keepAliveMs(typeof body === "object" && body !== null ? (body as { keep_alive?: unknown }).keep_alive : undefined);
}

/**
 * `/api/generate` without a prompt: load (or, with keep_alive 0, unload) the model and say done.
 * Served by another node, an unload goes there on the cheapest request that reaches its server (a
 * token count, which takes no slot), whose keep_alive is applied there as for any request.
 */
async function preload(c: Context, serving: Serving, call: OpenAiCall, model: string, keepAliveMs: number | undefined): Promise<Response> {
  const done = { model, created_at: new Date().toISOString(), response: "", done: true, done_reason: keepAliveMs === 0 ? "unload" : "load" };
  if ((await serving.preload(model, keepAliveMs)) === "elsewhere") {
    const res = await call(c, "/messages/count_tokens", { model, messages: [{ role: "user", content: "" }] }, 0);
    await res.body?.cancel().catch(() => undefined);
    if (!res.ok) return ollamaFail(c, res.status as ContentfulStatusCode, `could not reach the node serving "${model}" to unload it (${res.status})`);
  }
  return c.json(done);
}
