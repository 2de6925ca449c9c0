/**
 * What the router needs from the node to serve a model: the catalog of models it knows and a way
 * to get a server for one. On a single node that is the model store and the local pool.
 */
import type { MeshRouting } from "../mesh/routing.ts";
import type { MeshStatus } from "../mesh/status.ts";
import type { ModelInfo, ModelStore } from "../models/model-store.ts";
import { modelNotFound } from "../pool/errors.ts";
import type { Lease, Pool } from "../pool/pool.ts";
import type { RequestStats } from "./request-stats.ts";

export interface Serving {
  store: ModelStore;
  pool: Pool;
  version: string;
  mesh: { status(): MeshStatus };
  /** The mesh's catalog and where each model is served; without it, everything is local. */
  routing: MeshRouting | undefined;
  /** Figures of the most recent inference request, worked out when asked for. */
  lastStats: (() => RequestStats) | undefined;
}

export async function findModel(serving: Serving, name: string): Promise<ModelInfo> {
  const model = await serving.store.find(name);
  if (model) return model;
  const known = [...new Set([...serving.store.list().map((m) => m.name), ...(serving.routing?.catalog().map((m) => m.name) ?? [])])].sort();
  throw modelNotFound(`model "${name}" is not known to this node; known: ${known.length ? known.join(", ") : "none (put GGUF files in the models dir)"}`);
}

export async function acquireModel(serving: Serving, name: string, signal: AbortSignal): Promise<Lease> {
  return serving.pool.acquire(await findModel(serving, name), signal);
}

export type ModelStatus = "loaded" | "loading" | "unloaded";

export function modelStatus(serving: Serving, name: string): ModelStatus {
  const s = serving.pool.server(name);
  if (s?.state === "ready") return "loaded";
  if (s || serving.pool.isLoading(name)) return "loading";
  return "unloaded";
}
