/**
 * A `llama-server` child for one load, started: its argv from the model, the load's options and
 * the pool's settings (`load-launch.ts`), a free port, its log file in the state dir, the child key
 * it checks, its slot folder when its KV stays on this node (a split's lives on its workers'
 * devices: saving it would pull every byte over the network while the eviction waits), and the
 * restore of its saved slots before it takes a request. The pool waits for it to be ready.
 */
import { join } from "node:path";
import type { ModelInfo } from "../models/model-store.ts";
import type { ChildKey } from "./child-key.ts";
import { freePort } from "./free-port.ts";
import { launchArgv } from "./load-launch.ts";
import type { LoadOptions, PoolOptions, RpcSplit } from "./pool-types.ts";
import { DEFAULT_MAX_QUEUE, type QueueObserver } from "./slot-queue.ts";
import { WrappedServer } from "./wrapped-server.ts";

export type SpawnParts = Pick<PoolOptions, "llama" | "localDevices" | "defaultCtxSize" | "maxQueue" | "cpuShare" | "slotCache"> & {
  childKey: ChildKey;
  logDir: string;
  queueObserver: QueueObserver;
};

export interface SpawnRequest {
  model: ModelInfo;
  options: LoadOptions;
  /** The operator's and the request's allowlisted arguments (`server-args.ts`). */
  extraArgs: string[];
  split: RpcSplit;
  draft: ModelInfo | undefined;
}

/** The threads and polling a server runs with, for its "loading model" line (undefined: llama.cpp's own). */
export const threadsOf = (argv: readonly string[]): string | undefined =>
  argv.flatMap((a, i) => (["-t", "--threads", "-tb", "--threads-batch", "--poll"].includes(a.split("=")[0]!) ? [a.includes("=") ? a : `${a} ${argv[i + 1]}`] : [])).join(" ") || undefined;

export function newServer(p: SpawnParts, r: SpawnRequest): { server: WrappedServer; port: number; threads: string | undefined } {
  const { model, options, split } = r;
  const port = freePort();
  const slots = p.slotCache;
  const slotDir = split.endpoints.length === 0 ? slots?.folderFor(model) : undefined;
  const { argv, ctxSize } = launchArgv({
    binary: p.llama.llamaServer,
    model,
    options,
    extraArgs: r.extraArgs,
    split,
    draft: r.draft,
    localDevices: p.localDevices ?? [],
    port,
    apiKeyFile: p.childKey.file,
    defaultCtxSize: p.defaultCtxSize,
    cpu: p.cpuShare?.(model),
    ...(slotDir ? { slotDir } : {}),
  });
  const server = new WrappedServer({
    model: model.name,
    checkpoint: model.path,
    type: model.type,
    devices: model.devices,
    recipe: model.recipe,
    pinned: options.pinned ?? false,
    argv,
    port,
    headers: p.childKey.headers,
    logPath: join(p.logDir, `llama-server-${model.name.replace(/[^\w.-]+/g, "_")}.log`),
    maxQueue: p.maxQueue ?? DEFAULT_MAX_QUEUE,
    queueObserver: p.queueObserver,
    rpcWorkers: split.endpoints,
    ctxSize,
    ...(slotDir && slots ? { slotDir, prepare: (s: WrappedServer) => slots.restore(s) } : {}),
  });
  return { server, port, threads: threadsOf(argv) };
}
