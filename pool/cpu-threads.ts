/**
 * How a node's cores are shared among the llama.cpp processes it runs (pure): the threads
 * (`-t`, `-tb`) and polling (`--poll`) of each llama-server, and the threads of its rpc-server.
 *
 * llama.cpp's threads meet at spin barriers many times per token, and after a graph its idle
 * threads spin too (`--poll`, default 50: about 0.2 s of CPU after each request). Two processes
 * that run more threads than there are cores therefore stall each other: a thread spins at a
 * barrier while the peer it waits for is descheduled. On 2 cores (bench/two-models.ts, `wide`
 * models) two llama-servers that each took both cores generated about 32 tok/s each at once; with
 * one thread each and no polling, about 70 each (one alone on its node: about 130). So under the
 * `share` policy the cores are divided evenly among the processes that may compute at once (the
 * pool's limits, and the rpc-server while another node's split computes on it), and when there are several, no
 * llama-server polls: a process waiting for work sleeps instead of spinning on a busy one's cores
 * (polling cost a lone busy 2-thread server under 3%, within noise). A node that runs one process
 * at a time keeps llama.cpp's own defaults (every core, polling), today's speed.
 *
 * The division is fixed when a process starts (llama-server cannot change its threads later), so
 * it is by what may run at once, not by what runs now. A model whose weights are all on GPUs or
 * RPC devices needs few CPU threads. Threads are not pinned to cores: measured on a shared 2-core
 * machine, pinning two one-thread servers to a core each was slower (65 vs 80 tok/s each), as it
 * keeps a thread on a core another program is using. The operator's `-t`/`-tb`/`--poll` (in
 * `--llamacpp-args`, models.json or a load's arguments) always win. The rpc-server keeps every
 * core (`--rpc-threads`): it starts with the node, its work is a split's, which runs one layer
 * after another across the mesh, and it spins on nothing when idle; a llama-server that starts
 * while it lends to a split counts it.
 */
import type { ModelType } from "../models/model-type.ts";
import { canonicalFlag } from "./server-args.ts";

export const THREADS_POLICIES = ["share", "all"] as const;
/** `share`: the cores divided among the processes that may run at once; `all`: llama.cpp's own (every process every core, polling). */
export type ThreadsPolicy = (typeof THREADS_POLICIES)[number];

/** Where a model's weights are: on this node's CPU, or all offloaded (GPUs, RPC devices) so the CPU only feeds them. */
export type Placement = "cpu" | "offloaded";

/** CPU threads of a llama-server whose weights are all offloaded: enough to feed the devices. */
export const OFFLOADED_THREADS = 2;

export interface NodeProcesses {
  /** `--max-loaded-models`: llama-servers per model type at once; -1 = no limit. */
  perTypeLimit: number;
  /** Models this node could load, by type (its store's, the one being started included). */
  modelsByType: Readonly<Partial<Record<ModelType, number>>>;
  /** Its rpc-server may compute on the CPU at the same time (a CPU node lending it to another node's split). */
  rpcServer: boolean;
}

/** How many llama.cpp processes of this node may compute at once: per type, the limit or the models there are, whichever is fewer. */
export function processesAtOnce(n: NodeProcesses): number {
  let servers = 0;
  for (const count of Object.values(n.modelsByType)) {
    const models = Math.max(0, count ?? 0);
    servers += n.perTypeLimit < 0 ? models : Math.min(n.perTypeLimit, models);
  }
  return Math.max(1, servers + (n.rpcServer ? 1 : 0));
}

export interface PlacementInput {
  /** Split over RPC endpoints (the pool passes `-ngl 999`: every layer on a device). */
  split: boolean;
  /** The model's recipe runs on a GPU of this node. */
  gpu: boolean;
  /** What the model needs at its context (weights, KV cache, headroom). */
  needBytes: number;
  /** Memory of this node's GPUs together. */
  gpuBytes: number;
  /** Its free-form arguments: `--device none` or `-ngl 0` keep it on the CPU. */
  args: readonly string[];
}

/** Whether a load's weights sit on the CPU or are all offloaded; a model larger than the GPUs' memory keeps layers on the CPU. */
export function placementOf(p: PlacementInput): Placement {
  if (flagValue(p.args, DEVICE_FLAGS) === "none" || flagValue(p.args, GPU_LAYER_FLAGS) === "0") return "cpu";
  if (p.split) return "offloaded";
  return p.gpu && p.needBytes <= p.gpuBytes ? "offloaded" : "cpu";
}

export interface ServerThreadsInput {
  policy: ThreadsPolicy;
  /** CPUs this node may use. */
  cores: number;
  /** `processesAtOnce` for this node. */
  processes: number;
  placement: Placement;
  /** The free-form arguments the server also gets, after these: flags they set are left to them. */
  userArgs: readonly string[];
}

const THREAD_FLAGS = ["-t", "--threads"];
const BATCH_FLAGS = ["-tb", "--threads-batch"];
const POLL_FLAGS = ["--poll"];
const DEVICE_FLAGS = ["-dev", "--device"];
const GPU_LAYER_FLAGS = ["-ngl", "--gpu-layers", "--n-gpu-layers"];

/** The value given to the last of `names` in `args` (`--flag value` or `--flag=value`), if any. */
function flagValue(args: readonly string[], names: readonly string[]): string | undefined {
  let value: string | undefined;
  args.forEach((a, i) => {
    const eq = a.indexOf("=");
    const flag = canonicalFlag(eq > 0 ? a.slice(0, eq) : a);
    if (names.includes(flag)) value = eq > 0 ? a.slice(eq + 1) : args[i + 1];
  });
  return value;
}

const sets = (args: readonly string[], names: readonly string[]) => args.some((a) => names.includes(canonicalFlag(a.split("=")[0]!)));

/** A llama-server's threads and polling flags (none: llama.cpp's own). */
export function serverThreadArgs(i: ServerThreadsInput): string[] {
  if (i.policy === "all" || i.processes <= 1) return [];
  const share = Math.max(1, Math.floor(i.cores / i.processes));
  const threads = i.placement === "offloaded" ? Math.min(share, OFFLOADED_THREADS) : share;
  const args: string[] = [];
  // `-tb` defaults to `-t`: an operator's `-t` alone sets both.
  if (!sets(i.userArgs, THREAD_FLAGS)) {
    args.push("-t", String(threads));
    if (!sets(i.userArgs, BATCH_FLAGS)) args.push("-tb", String(threads));
  }
  if (!sets(i.userArgs, POLL_FLAGS)) args.push("--poll", "0");
  return args;
}

/** How this node shares its cores, as the pool's loads need it (`node/cpu-share.ts` works it out). */
export interface CpuShare {
  policy: ThreadsPolicy;
  cores: number;
  /** llama.cpp processes of this node that may compute at once (`processesAtOnce`). */
  processes: number;
  /** Memory of this node's GPUs together (0: none). */
  gpuBytes: number;
}
