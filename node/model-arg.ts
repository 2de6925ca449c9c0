/**
 * What a `--model` value names: a file, a model in the models dir, or a model by reference (pulled
 * once for the whole mesh) or by plain name (a peer may have it). Read before the node starts, so a
 * value that names nothing stops it with a clear error (`NodeSetupError`).
 */
import { defaultModelName, parseModelRef } from "../models/model-ref.ts";

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
