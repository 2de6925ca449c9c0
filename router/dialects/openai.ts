/**
 * The OpenAI-compatible `/v1` routes, and llama-server's own model routes at the root
 * (`/tokenize`...). Inference routes read `model` from the JSON body, get that model's server
 * (loading it when needed) or the peer that serves it, and proxy the original bytes there.
 */
import { Hono, type Context } from "hono";
import { basename } from "node:path";
import type { CatalogModel } from "../../placement/catalog.ts";
import { badRequest, errorResponse } from "../http/errors.ts";
import type { InferenceObserver } from "../http/request-metrics.ts";
import { INFERENCE_ROUTES, LLAMA_ROUTES } from "../http/route-table.ts";
import { noRoute } from "./no-route.ts";
import { remoteMediaUrl } from "../serving/media-urls.ts";
import { imageBytesFor, inlineRemoteImages, NETWORK_IO } from "../serving/image-fetch.ts";
import { catalogListing } from "./catalog-listing.ts";
import { knownModels } from "../../models/known-models.ts";
import { capabilitiesOf, capabilitiesOfModel, labelsWith } from "../../models/model-capabilities.ts";
import type { Serving } from "../serving/serving.ts";
import { TRANSLATORS } from "./dialects.ts";
import { embeddingsRefusalOn } from "../serving/embedding-models.ts";
import { carriesImage, knownVision, visionRefusal } from "../serving/vision-models.ts";
import { imagesRefusal } from "../serving/image-check.ts";
import type { JsonObject } from "../http/json.ts";
import { FORWARDED_HEADER } from "../../mesh/mesh-headers.ts";

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
      // The nodes that announce that content: those a copy, or a conversation's KV cache, may come from.
      content_holders: entry.copyFrom,
      contested: entry.contested === true,
      need_bytes: entry.needBytes,
      capacity_bytes: entry.capacityBytes,
      split: entry.split,
    },
  };
}

/** `forMember`: asked by another node of the mesh, which learns the file's name but not where this node keeps it. */
function modelEntry(serving: Serving, name: string, entry: CatalogModel | undefined, forMember: boolean) {
  const m = serving.localModels().find((x) => x.name === name)!;
  // Listed in the registry with its file not there (yet): 0.
  const created = Math.floor((m.modifiedMs ?? 0) / 1000);
  const local = serving.modelStatus(m.name);
  const caps = capabilitiesOfModel(m);
  return {
    id: m.name,
    object: "model" as const,
    created,
    owned_by: "mesh",
    type: m.type,
    size: m.sizeBytes,
    checkpoint: forMember ? basename(m.path) : m.path,
    recipe: m.recipe,
    // What it can be asked beyond text, in Lemonade's labels and Ollama's words.
    labels: labelsWith(m.labels, caps),
    capabilities: capabilitiesOf(m.type, caps),
    // Where its files came from (mesh's own models dir, a --model path, another tool's store) and their quant.
    store: m.store,
    quant: m.quant ?? null,
    ...meshFields(entry),
    status: local === "unloaded" && entry ? MESH_STATUS[entry.status] : local,
  };
}

/** A model of the mesh that is not on this node's disk. */
function remoteEntry(m: CatalogModel) {
  const caps = m.caps ?? [];
  return {
    id: m.name,
    object: "model" as const,
    created: 0,
    owned_by: "mesh",
    size: m.sizeBytes,
    // Its kind and what it can be asked, as its holders agree on them.
    ...(m.type !== undefined ? { type: m.type } : {}),
    labels: labelsWith([], caps),
    capabilities: capabilitiesOf(m.type, caps),
    ...meshFields(m),
    status: MESH_STATUS[m.status],
  };
}

/**
 * The `/v1` routes. Mounted under a Lemonade base URL beside the management routes, it leaves what
 * is not one of them to those (`fallThrough`): no catch-all of its own.
 */
export function openAiRoutes(serving: Serving, infer: OpenAiInference, { fallThrough = false } = {}): Hono {
  const v1 = new Hono();

  v1.get("/models", async (c) => {
    const models = await serving.refreshModels();
    // The well-known models a pull can fetch by id, and whether each fits this mesh.
    if (c.req.query("catalog") === "true") return c.json(catalogListing(knownModels(), new Set(models.map((m) => m.name)), serving.memory()));
    const local = new Set(models.map((m) => m.name));
    const meshModels = serving.catalog();
    const byName = new Map(meshModels.map((m) => [m.name, m]));
    const remote = meshModels
      .filter((m) => !local.has(m.name))
      .map(remoteEntry);
    const forMember = c.req.header(FORWARDED_HEADER) !== undefined;
    return c.json({ object: "list", data: [...models.map((m) => modelEntry(serving, m.name, byName.get(m.name), forMember)), ...remote] });
  });

  v1.get("/models/:id{.+}", async (c) => {
    const id = c.req.param("id");
    const entry = serving.meshEntry(id);
    if (entry && !(await serving.localModel(id))) {
      return c.json(remoteEntry(entry));
    }
    const m = await serving.findModel(id);
    return c.json(modelEntry(serving, m.name, entry, c.req.header(FORWARDED_HEADER) !== undefined));
  });

  for (const route of Object.keys(INFERENCE_ROUTES)) v1.post(route, async (c) => infer(c, { path: `/v1${route}`, body: await c.req.arrayBuffer() }));

  if (!fallThrough) v1.all("*", noRoute);
  return v1;
}

/** llama-server's own model routes at the root (`/tokenize`, `/detokenize`, `/apply-template`). */
export function llamaRoutes(infer: OpenAiInference): Hono {
  const root = new Hono();
  for (const route of Object.keys(LLAMA_ROUTES)) root.post(route, async (c) => infer(c, { path: route, body: await c.req.arrayBuffer() }));
  return root;
}

/** One inference request in OpenAI's words, whichever dialect's route `c` it came by. */
export interface OpenAiRequest {
  /** The public path it is for (`/v1/...`, or llama-server's own at the root). */
  path: string;
  /** The JSON body's bytes. */
  body: ArrayBuffer;
  /** An Ollama client's keep_alive in ms (undefined: it gave none); a member's comes in its header. */
  keepAlive?: { ms: number | undefined };
}

/**
 * Answers one inference request, as `/v1` does for its own and every dialect does for what it
 * translated (`c` is the route the client called: its metrics, headers, signal and key are the
 * request's). Errors thrown reach that route's error handler, in its dialect's shape.
 */
export type OpenAiInference = (c: Context, req: OpenAiRequest) => Promise<Response>;

/** What the node may fetch for a client's images by URL (`--media-hosts`), and its `--max-body-size`. */
export interface MediaFetching {
  allowHosts: readonly string[];
  maxBodyBytes: number;
}

const NO_MEDIA_HOSTS: MediaFetching = { allowHosts: [], maxBodyBytes: 64 * 2 ** 20 };

/** The refusal on this node of an image sent to `model` (the store's list as last scanned: a request costs no scan). */
const visionRefusalOn = (serving: Serving, model: string): string | undefined => visionRefusal(model, knownVision(serving.localModels(), serving.catalog()));

const encoded = (json: unknown): ArrayBuffer => encoder.encode(JSON.stringify(json)).buffer as ArrayBuffer;

/**
 * The body of a client's request that names media by URL, with the images fetched here, on the
 * node it called, and put inline; or the refusal. The model must read images first (nothing is
 * fetched for one that cannot). Only a client's: a member's request makes this node fetch nothing,
 * its URLs refused as every other media URL is.
 */
async function withClientImages(c: Context, serving: Serving, model: string, json: unknown, media: MediaFetching, bodyBytes: number): Promise<unknown> {
  const notVision = carriesImage(json) ? visionRefusalOn(serving, model) : undefined;
  if (notVision !== undefined) return badRequest(c, notVision, "model_not_vision");
  const inlined = await inlineRemoteImages(json, { allowHosts: media.allowHosts, maxBytes: imageBytesFor(media.maxBodyBytes, bodyBytes) }, NETWORK_IO, c.req.raw.signal);
  return "refusal" in inlined ? badRequest(c, inlined.refusal, inlined.code) : inlined.body;
}

/**
 * The one way into serving: the body's model, served here or by the peer the mesh routes it to,
 * translated first when its dialect is one the mesh does not pass on as it is (`TRANSLATORS`).
 */
export function openAiInference(serving: Serving, observer: InferenceObserver | undefined, keepAliveMs: number | undefined, media: MediaFetching = NO_MEDIA_HOSTS): OpenAiInference {
  return async (c, { path, body, keepAlive }) => {
    const started = performance.now();
    const parsed = modelOfBody(decoder.decode(body));
    if ("error" in parsed) return badRequest(c, parsed.error, "invalid_body");
    observer?.named(c, parsed.model);
    // Checked here, on the node a client or a member sent it to, before it goes anywhere.
    let remote = remoteMediaUrl(parsed.json);
    const forwarded = c.req.header(FORWARDED_HEADER) !== undefined;
    const json = remote === undefined || forwarded ? parsed.json : await withClientImages(c, serving, parsed.model, parsed.json, media, body.byteLength);
    if (json instanceof Response) return json;
    if (json !== parsed.json) remote = remoteMediaUrl(json);
    const translation = TRANSLATORS[path]?.(json as JsonObject);
    if (translation && "error" in translation) return badRequest(c, translation.error, "invalid_body");
    const sentBody = translation ? encoded(translation.body) : json === parsed.json ? body : encoded(json);
    const sentTo = translation?.path ?? path;
    if (remote !== undefined) {
      return badRequest(c, `media by URL is not fetched (${remote.slice(0, 200)}): send images and files inline, as data: URLs or base64 sources`, "remote_media_refused");
    }
    // An embedding asked of a model that does not embed is told so here, before anything loads or goes anywhere.
    const notEmbedding = sentTo === "/v1/embeddings" ? embeddingsRefusalOn(serving, parsed.model) : undefined;
    if (notEmbedding !== undefined) return badRequest(c, notEmbedding, "model_not_embedding");
    // So is an image sent to a model that cannot read it, or one that is no image llama.cpp reads.
    const sent = translation?.body ?? json;
    if (carriesImage(sent)) {
      const notVision = visionRefusalOn(serving, parsed.model);
      if (notVision !== undefined) return badRequest(c, notVision, "model_not_vision");
      const badImage = imagesRefusal(sent);
      if (badImage !== undefined) return badRequest(c, badImage, "invalid_image");
    }
    const res = await serving.infer({
      model: parsed.model,
      path: sentTo,
      body: sentBody,
      // What is sent, for its affinity key and the serving node's checks.
      json: translation?.body ?? json,
      started,
      headers: c.req.raw.headers,
      acceptedKey: c.get("acceptedKey"),
      signal: c.req.raw.signal,
      forwarded,
      keepAlive,
      refuse: (status, message, type, code, retryAfterS) => errorResponse(c, status, message, type, code, retryAfterS),
      onForwarded: (peer) => observer?.forwarded(peer),
      onAnswered: (stats, stream) => observer?.answered(c, stats, stream),
      keepAliveCommentMs: keepAliveMs,
    });
    return translation ? translation.answer(res) : res;
  };
}
