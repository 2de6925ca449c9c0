/**
 * What a `--model` value names: a file, a model in the models dir, or a model by reference (pulled
 * once for the whole mesh) or by plain name (a peer may have it). Read before the node starts, so a
 * value that names nothing stops it with a clear error (`NodeSetupError`); and the other settings
 * read once at the start (the Hugging Face token).
 */
import { homedir } from "node:os";
import { resolve } from "node:path";
import type { Config } from "../config/config.ts";
import { hubConfigFromEnv, TOKEN_VARIABLES, type HubConfig } from "../models/hf-hub.ts";
import { defaultModelName, parseModelRef } from "../models/model-ref.ts";
import type { ModelInfo } from "../models/model-store.ts";

/** `--model` values that may name files (rather than models in the models dir). */
export const isPath = (v: string) => v.includes("/") || /\.gguf$/i.test(v);

/** What a `--model` value names: a file, or a model by name (with the reference it is pulled by, when it is one). */
export type ModelArg = { kind: "path"; path: string } | { kind: "name"; name: string; ref?: string };

/**
 * Reads a `--model` value (pure but for the callbacks): a file that exists; a model the models dir
 * has (its registry knows its reference, if any); a reference (`org/repo:Q4_K_M`, a URL, a catalog
 * id), named as a pull names it; else a plain name (a peer may know it). A path that leads nowhere
 * is an error, and so is a malformed reference.
 */
export function modelArg(value: string, isFile: (path: string) => boolean, isKnown: (name: string) => boolean): ModelArg {
  if (isPath(value) && isFile(value)) return { kind: "path", path: value };
  if (isKnown(value)) return { kind: "name", name: value };
  // A path, absolute or relative (`dir/file.gguf` too: no repository is named so), is never a reference.
  if (/^[/.~]/.test(value) || (/\.gguf$/i.test(value) && value.split("/").length <= 2)) throw new NodeSetupError(`--model ${value}: no such file`);
  let ref: ReturnType<typeof parseModelRef>;
  try {
    ref = parseModelRef(value);
  } catch (err) {
    throw new NodeSetupError(`--model ${value}: ${(err as Error).message}`);
  }
  if (ref) return { kind: "name", name: defaultModelName(value), ref: value.trim() };
  if (isPath(value)) throw new NodeSetupError(`--model ${value}: no such file`);
  return { kind: "name", name: value };
}

export class NodeSetupError extends Error {}

/**
 * The node's `--model`s against the models it `known`s (`files`: those given as paths that exist):
 * the names it chooses among (`explicit`) and the references some were named by (announced with
 * them, and pulled once for the whole mesh when nobody has them). A name nobody here knows is an
 * error on a node that joins no mesh (a peer may have it, fetched once assigned, on one that does).
 */
export function resolveModelArgs(config: Pick<Config, "models" | "modelsDir" | "join">, files: readonly string[], known: readonly ModelInfo[]): { refs: Map<string, string>; explicit: string[] } {
  const args = config.models.map((m) => modelArg(m, (p) => files.includes(p), (name) => known.some((k) => k.name === name)));
  const refs = new Map(args.flatMap((a) => (a.kind === "name" && a.ref !== undefined ? [[a.name, a.ref] as const] : [])));
  const unknown = args.flatMap((a) => (a.kind === "name" && a.ref === undefined && !known.some((k) => k.name === a.name) ? [a.name] : []));
  if (unknown.length && !config.join) {
    throw new NodeSetupError(`--model ${unknown.join(", ")}: not in ${config.modelsDir} (known: ${known.map((k) => k.name).join(", ") || "none"})`);
  }
  const explicit = args.map((a) => {
    if (a.kind === "name") return a.name;
    const model = known.find((k) => k.path === resolve(a.path));
    if (!model) throw new NodeSetupError(`--model ${a.path}: not a model by itself (a later shard or a projector?); name the model's first shard`);
    return model.name;
  });
  return { refs, explicit };
}

/** The Hugging Face settings from the environment, read once: its token variables are then removed, a secret the node's children must not inherit. */
export function hubFromEnv(): HubConfig {
  try {
    return hubConfigFromEnv(process.env, homedir());
  } catch (err) {
    throw new NodeSetupError((err as Error).message);
  } finally {
    for (const variable of TOKEN_VARIABLES) delete process.env[variable];
  }
}
