/**
 * The serving core: what every dialect's handler asks of the node, as verbs. Handlers translate
 * their API's words and call these; how a model is found, loaded, routed to a server of the mesh
 * and answered, and the state that takes (requests in flight per server, members' unloads, the
 * last request's figures), live here and nowhere else. On a single node the parts are the model
 * store and the local pool; in a mesh, the mesh's routing joins them.
 */
import type { CatalogModel } from "../../placement/catalog.ts";
import type { MeshStatus } from "../../mesh/status.ts";
import type { ModelInfo, ModelStore } from "../../models/model-store.ts";
import type { ModelAdminApi } from "../../node/model-admin.ts";
import { modelNotFound, modelNotOnThisNode } from "../../pool/errors.ts";
import type { LoadOptions } from "../../pool/pool-types.ts";
import type { Pool } from "../../pool/pool.ts";
import { isLoaded, type WrappedServer } from "../../pool/wrapped-server.ts";
import type { RequestStats } from "../../metrics/request-stats.ts";
import { answerInference, type InferenceCall, type InferenceParts } from "./inference.ts";
import { applyKeepAlive, MemberUnloads } from "./keep-alive.ts";
import { Outstanding } from "./outstanding.ts";
import type { Dispatching } from "./dispatch.ts";
import { LastServers } from "./kv-hint.ts";
import { shortId } from "../../base/short-id.ts";
import { type MeshRouting } from "../../node/mesh-routing.ts";
import { MEMBER_LOADED_PATH } from "../../mesh/member-routes.ts";
import { jsonWithin } from "../http/bounded-body.ts";

/** What a member's list of its loaded models may take: its entries are small, and it answers at once. */
const PEER_LOADED_MAX_BYTES = 256 * 1024;
/** How long a member's list of its loaded models may take: a client's `/api/ps` waits no longer for it. */
export const PEER_LOADED_MS = 2_000;

/** What the serving core is built from (main.ts, or a test's bare node). */
export interface ServingParts {
  store: ModelStore;
  pool: Pool;
  version: string;
  mesh: { status(): MeshStatus };
  /** The mesh's catalog and where each model is served; without it, everything is local. */
  routing?: MeshRouting | undefined;
  /** Pulls and deletes models in this node's models dir; without it (a bare app in a test) those routes answer 503. */
  admin?: ModelAdminApi;
  /** Requests that share a prompt prefix go to the same server of their model (`--affinity`, default on). */
  affinity?: boolean;
  /** Memory each node of the mesh offers for models (this node's first), as announced; for `/v1/models?catalog=true`. */
  memory?: () => number[];
  /** Fetches a conversation's KV cache from the member that answered it last, when it moves here (`kv/`). */
  kvFollow?: InferenceParts["kvFollow"];
}

export type ModelStatus = "loaded" | "loading" | "unloaded";

/** What `/api/generate` without a prompt comes to: done here, or the keep_alive must go to the node that serves the model. */
export type Preload = "done" | "elsewhere";

export interface Serving {
  readonly version: string;
  /** This node and its mesh, for `/api/status`. */
  status(): MeshStatus;
  /** This node's id in the mesh; none without one (or before its identity is read). */
  nodeId(): string | undefined;

  /** The mesh's models and where each is served; none without a mesh. */
  catalog(): CatalogModel[];
  /** One model of the mesh's catalog. */
  meshEntry(name: string): CatalogModel | undefined;
  /** Whether another node's server answers for `model` now. */
  servedElsewhere(model: string): boolean;
  /** Memory each node of the mesh offers for models (this node's first). */
  memory(): number[];
  /**
   * What member `peerId` says of the models it has loaded (its Ollama `/api/ps` answer, a claim to
   * show, never to act on), within `PEER_LOADED_MS` and a bound on its size; none when it did not say.
   */
  loadedOn(peerId: string): Promise<unknown>;

  /** The models on this node's disk, as last read. */
  localModels(): readonly ModelInfo[];
  /** One model on this node's disk (read again if it is not known yet). */
  localModel(name: string): Promise<ModelInfo | undefined>;
  /** The models on this node's disk, read again. */
  refreshModels(): Promise<ModelInfo[]>;
  readonly modelsDir: string;
  /** A model this node can load, or the error that says where it is instead (another node's) or what it can load. */
  findModel(name: string): Promise<ModelInfo>;
  modelStatus(name: string): ModelStatus;

  /** This node's servers, loaded or loading. */
  servers(): WrappedServer[];
  /** Those of them loaded now (ready, or draining what they serve): not one still starting. */
  loadedServers(): WrappedServer[];
  server(model: string): WrappedServer | undefined;
  /** The server of the model loaded last, while it is loaded. */
  lastLoaded(): WrappedServer | undefined;
  loadOptionsOf(server: WrappedServer): LoadOptions | undefined;
  /** The most models of one type loaded at once. */
  readonly maxLoaded: number;
  idleUnloadMsOf(model: string): number;
  load(model: ModelInfo, options?: LoadOptions): Promise<WrappedServer>;
  /** Unloads `model` (every model without one); the names unloaded. */
  unload(model?: string): Promise<string[]>;
  /** Ollama's `/api/generate` without a prompt: loads (or, with keep_alive 0, unloads) the model here when it is this node's to. */
  preload(model: string, keepAliveMs: number | undefined): Promise<Preload>;

  /** One inference request, answered here or by the server of the mesh its route names. */
  infer(call: InferenceCall): Promise<Response>;
  /** Figures of the most recent inference request, worked out when asked for. */
  lastStats(): RequestStats | undefined;

  readonly admin: ModelAdminApi | undefined;
}

export class ServingCore implements Serving {
  readonly version: string;
  readonly admin: ModelAdminApi | undefined;
  private readonly store: ModelStore;
  private readonly pool: Pool;
  private readonly routing: MeshRouting | undefined;
  private readonly dispatching: Dispatching;
  private readonly memberUnloads = new MemberUnloads();
  private stats: (() => RequestStats) | undefined;
  /** What answering a request needs of this core: made once, not per request (the hot path). */
  private readonly inference: InferenceParts;

  constructor(private readonly parts: ServingParts) {
    this.version = parts.version;
    this.admin = parts.admin;
    this.store = parts.store;
    this.pool = parts.pool;
    this.routing = parts.routing;
    this.dispatching = {
      routing: parts.routing,
      affinity: parts.affinity !== false,
      outstanding: new Outstanding(),
      turn: 0,
      // Remembered only where a moved conversation's cache can be fetched.
      ...(parts.routing && parts.kvFollow ? { lastServers: new LastServers() } : {}),
    };
    this.inference = {
      pool: this.pool,
      routing: this.routing,
      dispatching: this.dispatching,
      memberUnloads: this.memberUnloads,
      findModel: (name) => this.findModel(name),
      recordStats: (stats) => void (this.stats = stats),
      kvFollow: parts.kvFollow,
    };
  }

  status = (): MeshStatus => this.parts.mesh.status();
  nodeId = (): string | undefined => this.routing?.nodeId();
  catalog = (): CatalogModel[] => this.routing?.catalog() ?? [];
  meshEntry = (name: string): CatalogModel | undefined => this.catalog().find((m) => m.name === name);
  servedElsewhere = (model: string): boolean => this.meshEntry(model)?.servers.some((id) => id !== this.nodeId()) === true;
  memory = (): number[] => this.parts.memory?.() ?? [];

  async loadedOn(peerId: string): Promise<unknown> {
    if (!this.routing) return undefined;
    try {
      const res = await this.routing.forward(peerId, { method: "GET", path: MEMBER_LOADED_PATH, headers: {}, body: new Uint8Array(0) }, AbortSignal.timeout(PEER_LOADED_MS));
      if (!res.ok) {
        await res.body?.cancel().catch(() => undefined);
        return undefined;
      }
      return await jsonWithin(res, PEER_LOADED_MAX_BYTES);
    } catch {
      return undefined;
    }
  }

  localModels = (): readonly ModelInfo[] => this.store.list();
  localModel = (name: string): Promise<ModelInfo | undefined> => this.store.find(name);
  refreshModels = (): Promise<ModelInfo[]> => this.store.refresh();
  get modelsDir(): string {
    return this.store.modelsDir;
  }

  async findModel(name: string): Promise<ModelInfo> {
    const model = await this.store.find(name);
    if (model) return model;
    const meshEntry = this.meshEntry(name);
    if (meshEntry) throw modelNotOnThisNode(notOnThisNode(name, meshEntry.servedBy ?? meshEntry.host));
    // Only what this node can load: a model of the mesh without a file here is not one.
    const local = this.store.list().map((m) => m.name).sort();
    throw modelNotFound(`model "${name}" is not known to this node; it can load: ${local.length ? local.join(", ") : "none (put GGUF files in the models dir)"}`);
  }

  modelStatus(name: string): ModelStatus {
    const s = this.pool.server(name);
    if (s && isLoaded(s.state)) return "loaded";
    if (s || this.pool.isLoading(name)) return "loading";
    return "unloaded";
  }

  servers = (): WrappedServer[] => this.pool.loaded();
  loadedServers = (): WrappedServer[] => this.pool.loaded().filter((s) => isLoaded(s.state));
  server = (model: string): WrappedServer | undefined => this.pool.server(model);
  lastLoaded = (): WrappedServer | undefined => (this.pool.lastLoaded ? this.pool.server(this.pool.lastLoaded) : undefined);
  loadOptionsOf = (server: WrappedServer): LoadOptions | undefined => this.pool.loadOptionsOf(server);
  get maxLoaded(): number {
    return this.pool.limit;
  }
  idleUnloadMsOf = (model: string): number => this.pool.idleUnloadMsOf(model);
  load = (model: ModelInfo, options?: LoadOptions): Promise<WrappedServer> => this.pool.load(model, options);
  unload = (model?: string): Promise<string[]> => this.pool.unload(model);

  async preload(model: string, keepAliveMs: number | undefined): Promise<Preload> {
    if (keepAliveMs === 0) {
      const server = this.pool.server(model);
      // The operator's pin outranks a client's keep_alive.
      if (server && !server.pinned) await this.pool.unload(model).catch(() => undefined);
      else if (!server && this.servedElsewhere(model)) return "elsewhere";
      return "done";
    }
    // Another node's model is loaded by its host; here there is nothing to do.
    if (this.meshEntry(model) && !(await this.store.find(model))) return "done";
    await this.pool.load(await this.findModel(model));
    applyKeepAlive(this.pool, model, keepAliveMs);
    return "done";
  }

  infer(call: InferenceCall): Promise<Response> {
    return answerInference(this.inference, call);
  }

  lastStats = (): RequestStats | undefined => this.stats?.();
}

/** Why a model of the mesh cannot be loaded here, and how to get it (pure). */
export function notOnThisNode(name: string, servedBy: string | undefined): string {
  const where = servedBy ? `the mesh serves it on node ${shortId(servedBy)}` : "the mesh knows it, no node serves it now";
  return `model "${name}" is not on this node's disk (${where}; requests for it through /v1 go there); to have this node fetch and serve it, start it with --model ${name} and --join`;
}
