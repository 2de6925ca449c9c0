/**
 * The argv of a wrapped `llama-server` (pure): flags the pool manages (model, host, port, alias,
 * type-specific serving flags) plus extra arguments, which may not touch what the pool manages.
 * Extra arguments are the operator's free-form ones (`--llamacpp-args`, `models.json`), checked
 * here only against the managed flags, then a load request's, already held to the allowlist in
 * `request-args.ts`.
 */
import { parse as parseShell } from "shell-quote";
import type { ModelType } from "../models/model-type.ts";
import { POOLING_NAMES, PoolingType } from "../models/model-type.ts";

/** Flags the pool sets itself; a user passing one would break routing, readiness or the split. */
const MANAGED_FLAGS = new Map<string, string>([
  ["-m", "the model comes from model_name"],
  ["--model", "the model comes from model_name"],
  ["-mu", "models come from the models dir"],
  ["--model-url", "models come from the models dir"],
  ["-hf", "models come from the models dir"],
  ["-hfr", "models come from the models dir"],
  ["--hf-repo", "models come from the models dir"],
  ["-dr", "models come from the models dir"],
  ["--docker-repo", "models come from the models dir"],
  ["--port", "the pool picks the port"],
  ["--host", "the server listens on 127.0.0.1 only"],
  ["--rpc", "the mesh decides which RPC workers a model uses"],
  ["-a", "the alias is the model name"],
  ["--alias", "the alias is the model name"],
  ["-c", "use ctx_size"],
  ["--ctx-size", "use ctx_size"],
  ["--embedding", "the model type decides"],
  ["--embeddings", "the model type decides"],
  ["--rerank", "the model type decides"],
  ["--reranking", "the model type decides"],
  ["--mmproj", "the projector beside the model is used"],
  ["--api-key", "the node checks API keys"],
  ["--api-key-file", "the node checks API keys"],
  ["--log-file", "the pool keeps the server's log"],
  ["--path", "the server's static files are not served"],
  ["--slot-save-path", "the node keeps saved slots in its state dir (--kv-cache-disk)"],
  ...draftFlags(["--spec-draft-model", "-md", "--model-draft", "--spec-draft-hf", "-hfd", "-hfrd", "--hf-repo-draft", "--fim-qwen-7b-spec", "--fim-qwen-14b-spec"], "the draft comes from models.json `draft` or the load's `draft_model`"),
  ...draftFlags(["--spec-type", "--spec-default"], "the node sets the speculative type when a draft is named (models.json `draft` or the load's `draft_model`)"),
  ...draftFlags(["--spec-draft-device", "-devd", "--device-draft", "--spec-draft-override-tensor", "-otd", "--override-tensor-draft"], "the node places the draft (on this host when the model is split over RPC workers)"),
]);

function draftFlags(names: string[], why: string): [string, string][] {
  return names.map((n) => [n, why]);
}

export class ServerArgsError extends Error {}

/** llama.cpp reads `_` as `-` in long flags (`--mcp_servers_json` is `--mcp-servers-json`). */
export const canonicalFlag = (name: string): string => (name.startsWith("--") ? name.replaceAll("_", "-") : name);

/** Why the pool sets `flag` itself (spelled as llama.cpp compares it), or undefined when it does not. */
export const managedFlagReason = (flag: string): string | undefined => MANAGED_FLAGS.get(flag);

/**
 * Splits an argument string like a shell would, without running one: `$NAME` stays as written
 * (no shell expands it, so it must not quietly become an empty word), and operators, globs and
 * comments are refused.
 */
export function splitArgs(text: string | undefined): string[] {
  if (!text) return [];
  const words = parseShell(text, (name) => `$${name}`);
  return words.map((w) => {
    if (typeof w !== "string") throw new ServerArgsError(`llamacpp_args must be plain arguments, not shell syntax: ${JSON.stringify(text)}`);
    return w;
  });
}

/**
 * Throws naming the first managed flag passed (as `--flag` or `--flag=value`; llama.cpp reads `_`
 * as `-` in long flags, so `--model_url` is `--model-url`).
 */
export function checkUserArgs(args: readonly string[]): void {
  for (const a of args) {
    const flag = a.split("=")[0]!;
    const why = MANAGED_FLAGS.get(canonicalFlag(flag));
    if (why) throw new ServerArgsError(`llamacpp_args may not contain ${flag}: ${why}`);
  }
}

export interface ServerArgsInput {
  binary: string;
  modelPath: string;
  mmproj: string | undefined;
  alias: string;
  type: ModelType;
  poolingType: number | undefined;
  port: number;
  /** The file of the key the server answers to (pool/child-key.ts). */
  apiKeyFile: string;
  /** 0 = the model's own context length. */
  ctxSize: number;
  /** The node's threads and polling for this server (`cpu-threads.ts`), before the extra args. */
  threadArgs?: readonly string[];
  /** Node-wide extra args first, then the load's: llama.cpp takes the last value of a flag. */
  extraArgs: readonly string[];
  rpcWorkers?: readonly string[];
  /** Shares of the layers per RPC endpoint, in their order. */
  tensorSplit?: readonly number[];
}

export function serverArgv(i: ServerArgsInput): string[] {
  const argv = [i.binary, "--model", i.modelPath, "--host", "127.0.0.1", "--port", String(i.port), "--api-key-file", i.apiKeyFile, "--alias", i.alias];
  argv.push("--ctx-size", String(i.ctxSize));
  if (i.mmproj) argv.push("--mmproj", i.mmproj);
  if (i.type === "embedding") {
    const own = i.poolingType !== undefined && i.poolingType !== PoolingType.NONE ? POOLING_NAMES[i.poolingType] : undefined;
    const userPooling = i.extraArgs.some((a) => a === "--pooling" || a.startsWith("--pooling="));
    argv.push("--embeddings");
    if (!userPooling) argv.push("--pooling", own ?? "mean");
  }
  if (i.type === "reranking") argv.push("--reranking");
  if (i.rpcWorkers?.length) {
    argv.push("--rpc", i.rpcWorkers.join(","), "-ngl", "999");
    if (i.tensorSplit?.length === i.rpcWorkers.length) argv.push("--tensor-split", i.tensorSplit.join(","));
  }
  argv.push(...(i.threadArgs ?? []), ...i.extraArgs);
  return argv;
}

/**
 * The free-form arguments of one load, checked: the node's `--llamacpp-args`, the model's
 * (models.json), then the request's; a load asked to run on the CPU has its accelerators hidden.
 * Throws ServerArgsError for one that clashes with the pool's own flags.
 */
export function loadArgs(defaultArgs: string | undefined, modelArgs: string | undefined, options: { requestArgs?: readonly string[]; backend?: string }): string[] {
  const args = [...splitArgs(defaultArgs), ...splitArgs(modelArgs), ...(options.requestArgs ?? [])];
  checkUserArgs(args);
  if (options.backend === "cpu") args.push("--device", "none");
  return args;
}
