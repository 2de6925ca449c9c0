/**
 * What a load launches: the draft it uses (`chooseDraft` over the models this node knows) and the
 * whole llama-server argv, the pool's managed flags, the node's share of the cores
 * (`cpu-threads.ts`), the free-form arguments, then the draft's flags. Draft flags are the node's
 * alone (`server-args.ts` refuses them in any user's arguments): the draft is a model of the
 * store, given by its path; the type is `draft-simple`; and a model
 * split over RPC workers keeps its draft on this host, on the local accelerators or the CPU, so
 * drafting costs no network round trip per token.
 */
import type { ModelInfo } from "../models/model-store.ts";
import { chooseDraft } from "../models/model-draft.ts";
import { needOf } from "../models/model-need.ts";
import { placementOf, serverThreadArgs, type CpuShare } from "./cpu-threads.ts";
import { Device } from "../models/recipe-devices.ts";
import { invalidDraft } from "./errors.ts";
import type { LoadOptions, RpcSplit } from "./pool-types.ts";
import { serverArgv } from "./server-args.ts";

/** The speculative type for a separate draft model (llama.cpp infers none from a plain GGUF). */
export const DRAFT_SPEC_TYPE = "draft-simple";

/** Where a load runs: what a draft and a projector are held to when the target is split. */
export interface DraftPlacement {
  /** The target is split over RPC workers. */
  split: boolean;
  /** The load's `llamacpp_backend` (`cpu` hides the accelerators). */
  backend?: string;
  /** This node's own accelerators, by llama.cpp's names (no RPC devices). */
  localDevices: readonly string[];
}

/**
 * The flags that load `draftPath` as the draft (pure). Unsplit, the draft follows the target's
 * devices; split, it is held to this host's: left to follow, llama.cpp would spread it over the
 * RPC devices too.
 */
export function draftArgs(draftPath: string | undefined, p: DraftPlacement): string[] {
  if (draftPath === undefined) return [];
  const args = ["--spec-draft-model", draftPath, "--spec-type", DRAFT_SPEC_TYPE];
  if (p.split) args.push("--spec-draft-device", p.backend === "cpu" || p.localDevices.length === 0 ? "none" : p.localDevices.join(","));
  return args;
}

/**
 * The flags that keep a split model's projector on this host (pure). llama.cpp puts a projector on
 * the first device of GPU type, and an RPC worker's device is one: left to it, a CPU host would
 * send every image's encoding to a worker. Unsplit, the projector follows llama.cpp's choice.
 */
export function projectorArgs(mmproj: string | undefined, p: DraftPlacement): string[] {
  if (mmproj === undefined || !p.split) return [];
  return p.backend === "cpu" || p.localDevices.length === 0 ? ["--no-mmproj-offload"] : ["--mmproj-device", p.localDevices[0]!];
}

/**
 * The draft of a load of `model`, looked up among the models this node knows; a PoolError 400
 * (`invalid_draft_model`) when it names no text model here. Nothing is asked of the store when no
 * draft is named.
 */
export async function resolveDraft(model: ModelInfo, options: LoadOptions, knownModels: ((name: string) => Promise<readonly ModelInfo[]>) | undefined): Promise<ModelInfo | undefined> {
  const name = options.draftModel ?? model.draft;
  if (name === undefined) return undefined;
  const choice = chooseDraft(model, options.draftModel, (await knownModels?.(name)) ?? []);
  if (!choice.ok) throw invalidDraft(choice.error);
  return choice.draft;
}

export interface LaunchInput {
  binary: string;
  model: ModelInfo;
  options: LoadOptions;
  extraArgs: readonly string[];
  split: RpcSplit;
  draft: ModelInfo | undefined;
  localDevices: readonly string[];
  port: number;
  apiKeyFile: string;
  defaultCtxSize: number;
  /** How this node shares its cores (pool/cpu-threads.ts); none: llama.cpp's own threads. */
  cpu?: CpuShare;
  /** The node's folder for this model's saved slots (`pool/slot-cache.ts`); none: it saves none. */
  slotDir?: string;
}

/** The threads and polling flags of one load (pure): by its placement, unless its own arguments set them. */
export function loadThreadArgs(i: Pick<LaunchInput, "model" | "extraArgs" | "split" | "cpu">, ctxSize: number): string[] {
  if (!i.cpu) return [];
  const placement = placementOf({
    split: i.split.endpoints.length > 0,
    gpu: (i.model.devices & Device.GPU) !== 0,
    needBytes: needOf(i.model.sizeBytes, i.model.facts, ctxSize || (i.model.facts?.contextLength ?? 0)),
    gpuBytes: i.cpu.gpuBytes,
    args: i.extraArgs,
  });
  return serverThreadArgs({ policy: i.cpu.policy, cores: i.cpu.cores, processes: i.cpu.processes, placement, userArgs: i.extraArgs });
}

/** The argv of one load's llama-server and the context it runs with (pure). */
export function launchArgv(i: LaunchInput): { argv: string[]; ctxSize: number } {
  const ctxSize = i.options.ctxSize ?? i.model.ctxSize ?? i.defaultCtxSize;
  const argv = serverArgv({
    binary: i.binary,
    modelPath: i.model.path,
    mmproj: i.model.mmproj,
    alias: i.model.name,
    type: i.model.type,
    poolingType: i.model.facts?.poolingType,
    port: i.port,
    apiKeyFile: i.apiKeyFile,
    ctxSize,
    threadArgs: loadThreadArgs(i, ctxSize),
    extraArgs: i.extraArgs,
    rpcWorkers: i.split.endpoints,
    tensorSplit: i.split.tensorSplit,
  });
  const placement: DraftPlacement = { split: i.split.endpoints.length > 0, backend: i.options.backend, localDevices: i.localDevices };
  argv.push(...draftArgs(i.draft?.path, placement), ...projectorArgs(i.model.mmproj, placement));
  if (i.slotDir !== undefined) argv.push("--slot-save-path", i.slotDir);
  return { argv, ctxSize };
}
