/**
 * The pool's vocabulary: what a load may ask for, what the pool is configured with, what a request
 * holds while it runs, and why a server was unloaded. Also the small pure rules over them.
 */
import type { SlotCache } from "./slot-cache.ts";
import type { LoadedServers } from "./loaded-servers.ts";
import type { LlamaBinaries } from "../llama/binaries.ts";
import type { Log } from "../base/log.ts";
import type { ModelInfo } from "../models/model-store.ts";
import type { CpuShare } from "./cpu-threads.ts";
import type { RequestArgs } from "./request-args.ts";
import type { WrappedServer } from "./wrapped-server.ts";

export interface LoadOptions {
  ctxSize?: number;
  /**
   * A load request's llama-server arguments. Only `parseRequestArgs` makes this type, so text from
   * a request cannot reach argv without passing the allowlist; the operator's free-form arguments
   * are `PoolOptions.defaultArgs` and a model's `models.json` entry, never a load option.
   */
  requestArgs?: RequestArgs;
  pinned?: boolean;
  /** `cpu` keeps the model off the build's accelerators; otherwise the build's own backend. */
  backend?: string;
  /** The load's `draft_model`: a model name, never a path (checked by `chooseDraft`); wins over models.json `draft`. */
  draftModel?: string;
}

export interface PoolOptions {
  llama: LlamaBinaries;
  stateDir: string;
  maxLoadedModels: number;
  idleUnloadMs: number;
  /** How long a request waits for its model's load to start before it gets 503. */
  loadTimeoutMs: number;
  defaultCtxSize: number;
  /** The operator's free-form llama-server arguments (`--llamacpp-args`): checked only against managed flags. */
  defaultArgs: string;
  log: Log;
  /**
   * Called when the set of loaded servers or their states change (for the node's announcement and
   * its decisions). Not on each request's release: nothing announced or decided moves with one (the
   * last request's time goes out in 10 s steps with every heartbeat), and under load the work it
   * set off per request was the router's largest cost.
   */
  onChange?: () => void;
  /**
   * How a model is split across RPC endpoints (`--rpc`); none runs it on this node alone. Asked once
   * per load (a retry runs the same layout), before anything is evicted for it: what it throws
   * refuses the load at no cost (a PoolError keeps its status: no memory here is no failure to retry).
   * The model comes with the load's context size.
   */
  rpcWorkersFor?: (model: ModelInfo) => Promise<RpcSplit>;
  /** Requests that may wait for a busy model's slot; more are answered 429 (`--max-queue`; default 64). */
  maxQueue?: number;
  /** Whether `model`'s server is hosted for the mesh and no on-demand load may evict it. */
  heldForMesh?: (model: string) => boolean;
  /** Every model the store knows, rescanned first when `name` is new to it: where a draft is looked up. */
  knownModels?: (name: string) => Promise<readonly ModelInfo[]>;
  /** This node's own accelerators (`Vulkan0`, ...; no RPC devices): where a split model's draft runs. */
  localDevices?: readonly string[];
  /** A server is being unloaded, and why (the node releases a mesh assignment unloaded for idleness). */
  onEvict?: (model: string, cause: EvictionCause) => void;
  /** How the node shares its cores with the server `model` is about to run in (pool/cpu-threads.ts); none: llama.cpp's own threads. */
  cpuShare?: (model: ModelInfo) => CpuShare;
  /** The servers' registry, made by the node before the pool for the parts that read it; none: the pool's own. */
  servers?: LoadedServers;
  /** Where text models' slots are saved when their servers stop and restored when they load (`slot-cache.ts`); none: never. */
  slotCache?: SlotCache;
}

export interface RpcSplit {
  endpoints: string[];
  /** Share of the layers per endpoint (`--tensor-split`), in the same order; even when absent. */
  tensorSplit?: number[];
}

export interface Lease {
  server: WrappedServer;
  release(): void;
  /**
   * Only for a request sent ahead of its slot (`SlotQueue.admit`): aborted with the refusal when a
   * fairer share of the queue displaces it before its answer begins; its request is then dropped
   * and the client gets that refusal.
   */
  revoked?: AbortSignal;
  /** Only with `revoked`: the answer began (its head came), so it can be displaced no more. */
  begun?: () => void;
}

export type EvictionCause = "lru" | "npu" | "nuclear" | "idle" | "unload" | "reload";

export interface PendingLoad {
  model: ModelInfo;
  options: LoadOptions;
  /** Requests waiting for this load; each gets the server already acquired. */
  waiters: number;
  explicit: boolean;
  /** Left the queue with its evictions done: from here a request waits for the load, not a slot. */
  started: boolean;
  result: WrappedServer | undefined;
  promise: Promise<WrappedServer>;
}

const optionsKey = (o: LoadOptions) => JSON.stringify([o.ctxSize ?? null, o.requestArgs ?? [], o.backend ?? "", o.draftModel ?? null]);
export const sameOptions = (a: LoadOptions | undefined, b: LoadOptions) => a !== undefined && optionsKey(a) === optionsKey(b);

/** Time to become healthy: a floor for process start, plus reading the weights at a slow disk's pace. */
export const readyDeadlineMs = (bytes: number) => 60_000 + (bytes / 2 ** 30) * 30_000;

/**
 * llama.cpp's own words for a command line it could not parse, or a draft file it could not open
 * (missing, corrupt or partial): no amount of free memory changes that.
 */
const ARGUMENT_ERRORS = ["error while handling argument", "error: invalid argument:", "expected value for argument", "the argument has been removed", "failed to load draft model"];

/**
 * Whether a failed start deserves the nuclear retry (evict every idle server, start once more):
 * only when the failure could be memory that other servers hold. Not when the load carries request
 * arguments: they are the likelier cause, and one bad request must not unload every idle model
 * (Lemonade retries any failure; llama-swap never retries; we retry only what eviction can fix).
 * Nor when llama-server refused its command line, which is the operator's to fix.
 */
export function mayBeMemory(failure: { requestArgs: boolean; error: string }): boolean {
  if (failure.requestArgs) return false;
  return !ARGUMENT_ERRORS.some((e) => failure.error.includes(e));
}
