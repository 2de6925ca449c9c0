/**
 * What the router needs from the node to serve a model: the catalog of models it knows and a way
 * to get a server for one. On a single node that is the model store and the local pool.
 */
import type { MeshRouting } from "../../placement/routing.ts";
import type { MeshStatus } from "../../mesh/status.ts";
import type { ModelInfo, ModelStore } from "../../models/model-store.ts";
import type { ModelAdminApi } from "../../node/model-admin.ts";
import { modelNotFound, modelNotOnThisNode } from "../../pool/errors.ts";
import type { Lease, Pool } from "../../pool/pool.ts";
import type { RequestStats } from "../../metrics/request-stats.ts";

export interface Serving {
  store: ModelStore;
  pool: Pool;
  version: string;
  mesh: { status(): MeshStatus };
  /** The mesh's catalog and where each model is served; without it, everything is local. */
  routing: MeshRouting | undefined;
  /** Figures of the most recent inference request, worked out when asked for. */
  lastStats: (() => RequestStats) | undefined;
  /** Pulls and deletes models in this node's models dir; without it (a bare app in a test) those routes answer 503. */
  admin?: ModelAdminApi;
  /** Requests that share a prompt prefix go to the same server of their model (`--affinity`, default on). */
  affinity?: boolean;
  /** Memory each node of the mesh offers for models (this node's first), as announced; for `/v1/models?catalog=true`. */
  memory?: () => number[];
}

export async function findModel(serving: Serving, name: string): Promise<ModelInfo> {
  const model = await serving.store.find(name);
  if (model) return model;
  const meshEntry = serving.routing?.catalog().find((m) => m.name === name);
  if (meshEntry) throw modelNotOnThisNode(notOnThisNode(name, meshEntry.servedBy ?? meshEntry.host));
  // Only what this node can load: a model of the mesh without a file here is not one.
  const local = serving.store.list().map((m) => m.name).sort();
  throw modelNotFound(`model "${name}" is not known to this node; it can load: ${local.length ? local.join(", ") : "none (put GGUF files in the models dir)"}`);
}

/** Why a model of the mesh cannot be loaded here, and how to get it (pure). */
export function notOnThisNode(name: string, servedBy: string | undefined): string {
  const where = servedBy ? `the mesh serves it on node ${servedBy.slice(0, 10)}` : "the mesh knows it, no node serves it now";
  return `model "${name}" is not on this node's disk (${where}; requests for it through /v1 go there); to have this node fetch and serve it, start it with --model ${name} and --join`;
}

/** `name`'s server, with a slot taken in `source`'s turn (none for a request that takes no slot). */
export async function acquireModel(serving: Serving, name: string, signal: AbortSignal, source: string | undefined): Promise<Lease> {
  return serving.pool.acquire(await findModel(serving, name), signal, source);
}

export type ModelStatus = "loaded" | "loading" | "unloaded";

export function modelStatus(serving: Serving, name: string): ModelStatus {
  const s = serving.pool.server(name);
  if (s?.state === "ready") return "loaded";
  if (s || serving.pool.isLoading(name)) return "loading";
  return "unloaded";
}
