/**
 * The OpenAI-compatible `/v1` routes, and llama-server's own model routes at the root
 * (`/tokenize`...). Inference routes read `model` from the JSON body, get that model's server
 * (loading it when needed) or the peer that serves it, and proxy the original bytes there.
 */
import { Hono, type Context, type Handler } from "hono";
import { statSync } from "node:fs";
import { basename } from "node:path";
import type { CatalogModel } from "../../placement/catalog.ts";
import { FORWARDED_HEADER } from "../../mesh/http-stream.ts";
import { ANSWERED_BY_HEADER } from "../../placement/routing.ts";
import { serverGone } from "../../pool/errors.ts";
import { badRequest, errorResponse } from "../http/errors.ts";
import type { InferenceObserver } from "../http/request-metrics.ts";
import { noRoute } from "./no-route.ts";
import { recordPassingStats } from "../serving/passing-stats.ts";
import { remoteMediaUrl } from "../serving/media-urls.ts";
import { proxyToServer } from "../serving/proxy.ts";
import { requestSource, takesSlot } from "../serving/request-source.ts";
import { dispatch } from "../serving/dispatch.ts";
import type { Route } from "../../placement/route.ts";
import { INFERENCE_ROUTES, LLAMA_ROUTES } from "../http/route-table.ts";
import { applyKeepAlive, KEEP_ALIVE_HEADER, keepAliveHeaderValue, MemberUnloads, parseKeepAliveHeader, type KeepAliveBinding } from "../serving/keep-alive.ts";
import { untilBodyEnds } from "../serving/outstanding.ts";
import { catalogListing } from "./catalog-listing.ts";
import { knownModels } from "../../models/known-models.ts";
import { acquireModel, findModel, modelStatus, type Serving } from "../serving/serving.ts";
import { TRANSLATORS } from "./dialects.ts";
import { embeddingsRefusalOn } from "../serving/embedding-models.ts";
import { toolChoiceRefusal } from "../serving/tool-choice.ts";
import type { JsonObject } from "../http/json.ts";
import { guardedAnswer } from "../http/sse-guard.ts";

const decoder = new TextDecoder();
const encoder = new TextEncoder();

export { INFERENCE_PATHS, INFERENCE_ROUTES, LLAMA_ROUTES } from "../http/route-table.ts";

/** `model` from a request body, or the reason there is none. */
export function modelOfBody(text: string): { model: string; json: unknown } | { error: string } {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    return { error: `request body is not valid JSON: ${(err as Error).message}` };
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) return { error: "request body must be a JSON object" };
  const model = (json as { model?: unknown }).model;
  if (typeof model !== "string" || model === "") return { error: 'request body needs a "model" (a string naming a model from GET /v1/models)' };
  return { model, json };
}

/** The status /v1/models gives: the pool's words, with the mesh's "needs-capacity" beside them. */
const MESH_STATUS = { ready: "loaded", loading: "loading", unloaded: "unloaded", "needs-capacity": "needs-capacity", failed: "failed" } as const;

function meshFields(entry: CatalogModel | undefined) {
  if (!entry) return {};
  return {
    host: entry.host ?? null,
    mesh: {
      status: entry.status,
      host: entry.host ?? null,
      nodes_serving: entry.nodesServing,
      // Where requests for it may go: its host and its replicas.
      servers: entry.servers,
      nodes_on_disk: entry.nodesOnDisk,
      // The content its holders agree on (SHA-256 over its files), the only one copied; none when they disagree.
      content_sha256: entry.identity ?? null,
      contested: entry.contested === true,
      need_bytes: entry.needBytes,
      capacity_bytes: entry.capacityBytes,
      split: entry.split,
    },
  };
}

/** `forMember`: asked by another node of the mesh, which learns the file's name but not where this node keeps it. */
function modelEntry(serving: Serving, name: string, entry: CatalogModel | undefined, forMember: boolean) {
  const m = serving.store.list().find((x) => x.name === name)!;
  let created = 0;
  try {
    created = Math.floor(statSync(m.path).mtimeMs / 1000);
  } catch {
    // listed in the registry, file not there (yet)
  }
  const local = modelStatus(serving, m.name);
  return {
    id: m.name,
    object: "model" as const,
    created,
    owned_by: "mesh",
    type: m.type,
    size: m.sizeBytes,
    checkpoint: forMember ? basename(m.path) : m.path,
    recipe: m.recipe,
    labels: m.labels,
    // Where its files came from (mesh's own models dir, a --model path, another tool's store) and their quant.
    store: m.store,
    quant: m.quant ?? null,
    ...meshFields(entry),
    status: local === "unloaded" && entry ? MESH_STATUS[entry.status] : local,
  };
}

/** A model of the mesh that is not on this node's disk. */
function remoteEntry(m: CatalogModel) {
  return { id: m.name, object: "model" as const, created: 0, owned_by: "mesh", size: m.sizeBytes, ...meshFields(m), status: MESH_STATUS[m.status] };
}

async function forward(serving: Serving, peer: string, path: string, body: ArrayBuffer, signal: AbortSignal, keepAlive: KeepAlive | undefined): Promise<Response> {
  const carried = keepAliveHeaderValue(keepAlive?.ms);
  const headers = { "content-type": "application/json", ...(carried === undefined ? {} : { [KEEP_ALIVE_HEADER]: carried }) };
  try {
    return await serving.routing!.forward(peer, { method: "POST", path, headers, body: new Uint8Array(body) }, signal);
  } catch (err) {
    // iroh's errors carry their causes and a native stack trace over several lines: the causes are enough.
    const why = (err as Error).message.split(/\n\s*Stack backtrace:/)[0]!.replace(/\s+/g, " ").trim();
    throw serverGone(`the node serving this model (${peer.slice(0, 10)}) could not be reached: ${why}`);
  }
}

function answeredBy(serving: Serving): Record<string, string> | undefined {
  const id = serving.routing?.nodeId();
  return id ? { [ANSWERED_BY_HEADER]: id } : undefined;
}

export function openAiRoutes(serving: Serving, observer?: InferenceObserver, keepAliveMs?: number): Hono {
  const v1 = new Hono();

  v1.get("/models", async (c) => {
    const models = await serving.store.refresh();
    // The well-known models a pull can fetch by id, and whether each fits this mesh.
    if (c.req.query("catalog") === "true") return c.json(catalogListing(knownModels(), new Set(models.map((m) => m.name)), serving.memory?.() ?? []));
    const local = new Set(models.map((m) => m.name));
    const meshModels = serving.routing?.catalog() ?? [];
    const byName = new Map(meshModels.map((m) => [m.name, m]));
    const remote = meshModels
      .filter((m) => !local.has(m.name))
      .map(remoteEntry);
    const forMember = c.req.header(FORWARDED_HEADER) !== undefined;
    return c.json({ object: "list", data: [...models.map((m) => modelEntry(serving, m.name, byName.get(m.name), forMember)), ...remote] });
  });

  v1.get("/models/:id{.+}", async (c) => {
    const id = c.req.param("id");
    const entry = serving.routing?.catalog().find((m) => m.name === id);
    if (entry && !(await serving.store.find(id))) {
      return c.json(remoteEntry(entry));
    }
    const m = await findModel(serving, id);
    return c.json(modelEntry(serving, m.name, entry, c.req.header(FORWARDED_HEADER) !== undefined));
  });

  for (const route of Object.keys(INFERENCE_ROUTES)) v1.post(route, inference(serving, `/v1${route}`, observer, keepAliveMs));

  v1.all("*", noRoute);
  return v1;
}

/** llama-server's own model routes at the root (`/tokenize`, `/detokenize`, `/apply-template`). */
export function llamaRoutes(serving: Serving, observer?: InferenceObserver, keepAliveMs?: number): Hono {
  const root = new Hono();
  for (const route of Object.keys(LLAMA_ROUTES)) root.post(route, inference(serving, route, observer, keepAliveMs));
  return root;
}

/** The llama-server path of a public inference path (one of `INFERENCE_PATHS`). */
const upstreamPathOf = (path: string): string => (path.startsWith("/v1/") ? INFERENCE_ROUTES[path.slice(3)]! : LLAMA_ROUTES[path]!);

/** Per node: when members' keep_alive last unloaded each model (every route of the node shares it). */
const memberUnloads = new WeakMap<Serving, MemberUnloads>();
const memberUnloadsOf = (serving: Serving): MemberUnloads => memberUnloads.get(serving) ?? memberUnloads.set(serving, new MemberUnloads()).get(serving)!;

/** A client's Ollama keep_alive, in ms (undefined: it gave none), to apply where the request is answered; `member`: carried by one. */
type KeepAlive = { ms: number | undefined; member?: true };

/**
 * The keep_alive a request carries: the Ollama adapter's (in its bindings, which no client sets),
 * or the header of a request a member forwarded, as far as a member's counts; nothing anyone else
 * sends counts (`keep-alive.ts`).
 */
function keepAliveOf(c: Context, forwarded: boolean, model: string, unloads: MemberUnloads): KeepAlive | undefined {
  if (!forwarded) return (c.env as KeepAliveBinding | undefined)?.ollamaKeepAlive;
  const carried = parseKeepAliveHeader(c.req.header(KEEP_ALIVE_HEADER));
  const ms = carried === undefined ? undefined : unloads.allows(model, carried);
  return ms === undefined ? undefined : { ms, member: true };
}

/**
 * One inference route (`path`, as public: `/v1/...` or llama-server's own at the root): the body's
 * model, served here or by the peer the mesh routes it to, translated first when its dialect is
 * one the mesh does not pass on as it is (`TRANSLATORS`).
 */
function inference(serving: Serving, path: string, observer: InferenceObserver | undefined, keepAliveMs: number | undefined): Handler {
  return async (c) => {
    const started = performance.now();
    let body = await c.req.arrayBuffer();
    const parsed = modelOfBody(decoder.decode(body));
    if ("error" in parsed) return badRequest(c, parsed.error, "invalid_body");
    const translation = TRANSLATORS[path]?.(parsed.json as JsonObject);
    if (translation && "error" in translation) return badRequest(c, translation.error, "invalid_body");
    if (translation) body = encoder.encode(JSON.stringify(translation.body)).buffer as ArrayBuffer;
    const sentTo = translation?.path ?? path;
    // What is sent, for its affinity key and the serving node's checks.
    const json = translation?.body ?? parsed.json;
    observer?.named(c, parsed.model);
    // Checked here, on the node a client or a member sent it to, before it goes anywhere.
    const remote = remoteMediaUrl(parsed.json);
    if (remote !== undefined) {
      return badRequest(c, `media by URL is not fetched (${remote.slice(0, 200)}): send images and files inline, as data: URLs or base64 sources`, "remote_media_refused");
    }
    // An embedding asked of a model that does not embed is told so here, before anything loads or goes anywhere.
    const notEmbedding = sentTo === "/v1/embeddings" ? embeddingsRefusalOn(serving, parsed.model) : undefined;
    if (notEmbedding !== undefined) return badRequest(c, notEmbedding, "model_not_embedding");
    const forwarded = c.req.header(FORWARDED_HEADER) !== undefined;
    const send = sender(serving, c, { model: parsed.model, body, json, path: sentTo, started, keepAlive: keepAliveOf(c, forwarded, parsed.model, memberUnloadsOf(serving)) }, observer, keepAliveMs);
    const res = await dispatch({ serving, model: parsed.model, json, header: (name) => c.req.header(name), forwarded, signal: c.req.raw.signal, send });
    return translation ? translation.answer(res) : res;
  };
}

/** How a stream from a peer ends when the peer goes away mid-answer (before it could end it itself). */
const PEER_GONE = { message: "the node serving this model went away mid-stream; retry", code: "peer_gone" };

/** Sends a request where its route says: to a peer, a 503 the route gives, or this node's pool (none: no mesh). */
function sender(
  serving: Serving,
  c: Context,
  req: { model: string; body: ArrayBuffer; json: unknown; path: string; started: number; keepAlive: KeepAlive | undefined },
  observer: InferenceObserver | undefined,
  keepAliveMs: number | undefined,
): (route: Route | undefined) => Promise<Response> {
  return async (route: Route | undefined): Promise<Response> => {
    if (route?.to === "peer") {
      observer?.forwarded(route.peerId);
      // Its keep_alive goes along: the peer that answers applies it there.
      const res = await forward(serving, route.peerId, req.path, req.body, c.req.raw.signal, req.keepAlive);
      // The answer passes through here: this node's /api/v1/stats tells it too.
      const passed = recordPassingStats(res, req.model, upstreamPathOf(req.path), req.started, (s) => (serving.lastStats = s));
      return guardedAnswer(passed, req.path, PEER_GONE);
    }
    if (route?.to === "unavailable") return errorResponse(c, 503, route.message, "service_unavailable", "model_not_ready", route.retryAfterS);
    const upstreamPath = upstreamPathOf(req.path);
    const lease = await acquireModel(serving, req.model, c.req.raw.signal, takesSlot(upstreamPath) ? requestSource(c.req.raw.headers) : undefined);
    // Only the node that serves the model knows its chat template: a tool call it cannot make is refused here, whoever sent the request.
    const noTools = toolChoiceRefusal(req.path, req.model, req.json, lease.server.templateCaps);
    if (noTools !== undefined) {
      lease.release();
      return badRequest(c, noTools, "tool_calls_unsupported");
    }
    const res = await proxyToServer({
      lease,
      model: req.model,
      path: upstreamPath,
      body: req.body,
      clientSignal: c.req.raw.signal,
      extraHeaders: answeredBy(serving),
      keepAliveMs,
      onStats: (s, stream) => {
        serving.lastStats = s;
        observer?.answered(c, s, stream);
      },
    });
    const keepAlive = req.keepAlive;
    // Answered here: its keep_alive applies to this node's server once the answer has gone.
    if (!keepAlive || !res.ok) return res;
    return untilBodyEnds(res, () => {
      const effect = applyKeepAlive(serving.pool, req.model, keepAlive.ms);
      if (keepAlive.member && effect.action === "unload") memberUnloadsOf(serving).unloaded(req.model);
    });
  };
}
