/**
 * What the node knows that decides how its cores are shared (the decision is pool/cpu-threads.ts):
 * the CPUs it may use (its affinity, as `taskset` leaves it), the pool's per-type limit over the
 * models its store has, its GPUs' memory, and whether its rpc-server may compute beside its
 * llama-servers. That needs a CPU node (a GPU node's rpc-server computes on the GPU) that lends its
 * rpc-server to another node's split of its model now: a node that hosts its model runs it itself
 * and no split computes on its rpc-server, so a node with one model at a time keeps every core for
 * it, alone or in a mesh. Asked when each process starts.
 */
import { availableParallelism } from "node:os";
import type { Config } from "../config/config.ts";
import type { LlamaDevice } from "../llama/devices.ts";
import type { ModelInfo } from "../models/model-store.ts";
import type { ModelType } from "../models/model-type.ts";
import { processesAtOnce } from "../pool/cpu-threads.ts";
import type { CpuShare } from "../pool/cpu-threads.ts";

export interface CpuShareSources {
  /** The models this node's store has now. */
  models: () => readonly ModelInfo[];
  /** Its rpc-server computes for another node's split now (it is a worker of its assigned model). */
  lendsToSplit: () => boolean;
}

export interface NodeCpuShare {
  /** For the llama-server `model` is about to run in. */
  forServer: (model: ModelInfo) => CpuShare;
}

export function nodeCpuShare(config: Pick<Config, "threadsPolicy" | "maxLoadedModels">, devices: readonly LlamaDevice[], from: CpuShareSources): NodeCpuShare {
  const cores = availableParallelism();
  const gpuBytes = devices.reduce((sum, d) => sum + d.totalBytes, 0);
  const byType = (extra: ModelInfo | undefined) => {
    const counts: Partial<Record<ModelType, number>> = {};
    const models = from.models();
    for (const m of models) counts[m.type] = (counts[m.type] ?? 0) + 1;
    // The model about to start counts even before the store lists it (a file still being fetched).
    if (extra && !models.some((m) => m.name === extra.name)) counts[extra.type] = (counts[extra.type] ?? 0) + 1;
    return counts;
  };
  const processes = (extra: ModelInfo | undefined, rpcServer: boolean) => processesAtOnce({ perTypeLimit: config.maxLoadedModels, modelsByType: byType(extra), rpcServer });
  return {
    forServer: (model) => ({ policy: config.threadsPolicy, cores, gpuBytes, processes: processes(model, devices.length === 0 && from.lendsToSplit()) }),
  };
}
