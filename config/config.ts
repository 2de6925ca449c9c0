/**
 * The node's settings after flags (and, later, environment and config file) are resolved. Every
 * other module takes what it needs from here; none of them parses text.
 */
import { homedir } from "node:os";
import type { JoinToken } from "../mesh/join-token.ts";
import { DEFAULT_LINE, type RelaySetting, type TransportLine } from "../mesh/transport.ts";
import { join } from "node:path";
import { LLAMA_RELEASE } from "../llama/pin.ts";
import { GITHUB_API } from "../llama/release.ts";
import type { LlamaFlavor } from "../llama/source-build.ts";
import type { ThreadsPolicy } from "../pool/cpu-threads.ts";

/** Where a setting's value came from, in the order they override each other. */
export type SettingSource = "flag" | "env" | "file" | "default";

export const LOG_FORMATS = ["text", "json"] as const;

export interface Config {
  /** API port; 0 picks a free one (tests). */
  port: number;
  listen: string;
  stateDir: string;
  modelsDir: string;
  /** Names or paths of models to serve, in the order given. */
  models: string[];
  join: JoinToken | undefined;
  /** Wrapped servers per model type; -1 = no limit. */
  maxLoadedModels: number;
  /** 0 = never. */
  idleUnloadMs: number;
  /** How long a request waits for its model's load to start (its slot may be busy) before 503. */
  loadTimeoutMs: number;
  /** Context size a model loads with unless its load asks otherwise; 0 = the model's own. */
  ctxSize: number;
  /** Extra arguments for every llama-server, as one shell-like string. */
  llamacppArgs: string;
  maxBodyBytes: number;
  /** Threads of this node's rpc-server (the compute it offers the mesh). */
  rpcThreads: number;
  /** How the cores are shared among this node's llama.cpp processes (pool/cpu-threads.ts). */
  threadsPolicy: ThreadsPolicy;
  /** Bound on rpc-server's tensor cache in the state dir. */
  rpcCacheBytes: number;
  /** Disk for conversations' KV caches saved when their model unloads (pool/slot-cache.ts); 0: none saved. */
  kvCacheBytes: number;
  /** Offer and use the direct TLS path for RPC between peers that can reach each other. */
  rpcDirect: "on" | "off";
  /** Download models this node is assigned (from peers or their source); off: lend compute only. */
  fetch: "on" | "off";
  /** May a load on demand (a request, `/api/v1/load`) unload the model this node hosts for the mesh? */
  evictMeshModels: "on" | "off";
  /** Requests that share a prompt prefix (a session, a user, a chat's opening) go to the same server of their model; off: the least loaded. */
  affinity: "on" | "off";
  /** Take replicas of models whose servers are pressed (`placement/replicas.ts`); off: this node is given none. */
  replicas: "on" | "off";
  /** A replica with no request this long is unloaded; 0 = never (it still goes when its memory is wanted). */
  replicaIdleMs: number;
  /** Overrides detected VRAM. */
  vramBytes: number | undefined;
  llamaDir: string | undefined;
  /** The llama.cpp release to fetch on first run (default: the one this mesh is pinned to). */
  llamaRelease: string;
  /** Overrides the detected build flavor. */
  llamaFlavor: LlamaFlavor | undefined;
  /** Base of the GitHub-style releases API (a mirror's). */
  llamaMirror: string;
  /** iroh's public relays, none (direct addresses only), or the operator's own (`--relay URL`, iroh1 only). */
  relay: RelaySetting;
  /**
   * The iroh line to found a mesh on, or to move this node's mesh to, when the operator gave it
   * (`settingSources.transport`); a joiner follows its token and a member its state dir (`mesh/mesh-line.ts`).
   */
  transport: TransportLine;
  quicBind: { host: string; port: number } | undefined;
  /** A second listener serving the same API (e.g. 127.0.0.1:11434, where Ollama's tools look); none by default. */
  ollamaListen: { host: string; port: number } | undefined;
  apiKeys: string[];
  /** Listen beyond loopback even without an API key. */
  insecure: boolean;
  /** Origins (`scheme://host[:port]`) whose web pages may call the API; none by default. */
  corsOrigins: string[];
  /**
   * The nodes (whole ids; `self` for this node alone) that may serve the
   * requests of this node's clients and take over a model it runs; none: any member. This node always may.
   */
  hosts: string[];
  /** Hosts (names or IPs) a client's images by URL may come from whatever their addresses, e.g. a NAS on the LAN; none: public addresses only. */
  mediaHosts: string[];
  /** Seconds a connection may move no bytes before it is closed (a handler at work does not count). */
  idleTimeoutS: number;
  /** Requests in flight at once; more are answered 503. */
  maxConnections: number;
  /** Requests that may wait for a busy model's slots; more are answered 429 (0: none wait). */
  maxQueue: number;
  /** Where each setting (by flag name) came from: flag, env, file or default. */
  settingSources: Record<string, SettingSource>;
  logFormat: (typeof LOG_FORMATS)[number];
  /** List and serve the models other tools keep (Ollama, LM Studio, Hugging Face cache, llama.cpp cache), in place. */
  scanModelStores: "on" | "off";
  /** More folders of GGUF models served in place (MESH_MODEL_STORES, `:`-separated). */
  modelStores: string[];
}

export function defaultConfig(home: string = homedir()): Config {
  return {
    port: 9337,
    listen: "127.0.0.1",
    stateDir: join(home, ".mesh"),
    modelsDir: join(home, ".models"),
    models: [],
    join: undefined,
    maxLoadedModels: 1,
    idleUnloadMs: 30 * 60_000,
    loadTimeoutMs: 2 * 60_000,
    ctxSize: 4096,
    llamacppArgs: "",
    maxBodyBytes: 64 * 2 ** 20,
    rpcThreads: Math.max(1, navigator.hardwareConcurrency),
    threadsPolicy: "share",
    rpcCacheBytes: 32 * 2 ** 30,
    kvCacheBytes: 4 * 2 ** 30,
    rpcDirect: "on",
    fetch: "on",
    evictMeshModels: "off",
    affinity: "on",
    replicas: "on",
    replicaIdleMs: 5 * 60_000,
    vramBytes: undefined,
    llamaDir: undefined,
    llamaRelease: LLAMA_RELEASE,
    llamaFlavor: undefined,
    llamaMirror: GITHUB_API,
    relay: "default",
    transport: DEFAULT_LINE,
    quicBind: undefined,
    ollamaListen: undefined,
    apiKeys: [],
    insecure: false,
    corsOrigins: [],
    hosts: [],
    mediaHosts: [],
    idleTimeoutS: 30,
    maxConnections: 512,
    maxQueue: 64,
    settingSources: {},
    logFormat: "text",
    scanModelStores: "on",
    modelStores: [],
  };
}
