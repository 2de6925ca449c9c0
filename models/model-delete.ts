/**
 * Whether a model may be deleted, and what goes with it (pure). mesh deletes only what it downloaded
 * itself into its own models dir (models.json marks it `pulled`): a file put there by hand stays, and a model another tool keeps (Ollama's blobs, LM Studio's folder, the Hugging
 * Face cache, a `--model PATH`, an extra store) is refused and never touched, and so is any file
 * that lies outside the models dir whatever the model's store says. A loaded model is refused
 * (unload it first), and so is one that is being pulled. Files another model still uses (a
 * projector two quants of one repo share, a second name for one file) stay. The registry entries
 * that name the model, or a file that goes, go with it, so no name is left pointing at nothing.
 */
import { isAbsolute, join, relative, resolve, sep } from "node:path";
import type { ModelInfo, ModelStoreKind } from "./model-store.ts";
import { isSafeModelName } from "./model-transfer.ts";

export type DeletableModel = Pick<ModelInfo, "name" | "path" | "files" | "mmproj" | "store" | "pulled">;

export interface DeleteFacts {
  /** The models dir, as a real path (symlinks resolved). */
  modelsDir: string;
  /** Each of the model's files as a real path of its folder plus its own name (a link itself is removed, not what it points to). */
  realPath: (file: string) => string;
  /** Loaded or loading on this node. */
  loaded: boolean;
  /** A pull of this name is running. */
  pulling: boolean;
  /** Every other model this node knows: their files stay. */
  others: readonly Pick<ModelInfo, "name" | "files" | "mmproj">[];
}

export type DeleteRefusal = { ok: false; status: 400 | 403 | 404 | 409; code: string; message: string };
export type DeletePlan = { ok: true; name: string; files: string[]; kept: string[] };

const STORE_NAMES: Record<ModelStoreKind, string> = {
  "models-dir": "mesh's models dir",
  path: "a --model path given to this node",
  ollama: "Ollama",
  "lm-studio": "LM Studio",
  huggingface: "the Hugging Face cache",
  "llama.cpp": "llama.cpp's cache",
  extra: "a MESH_MODEL_STORES folder",
};

const refuse = (status: DeleteRefusal["status"], code: string, message: string): DeleteRefusal => ({ ok: false, status, code, message });

/** Whether `path` lies inside `dir` (both absolute, resolved), not `dir` itself. */
export function isInside(dir: string, path: string): boolean {
  const rel = relative(resolve(dir), resolve(path));
  return rel !== "" && !rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel);
}

/** What deleting `name` removes, or why it may not be deleted. `model`: the one of that name on this node, if any. */
export function deletePlan(name: string, model: DeletableModel | undefined, facts: DeleteFacts): DeletePlan | DeleteRefusal {
  if (!isSafeModelName(name)) return refuse(400, "invalid_model_name", `"${name.slice(0, 200)}" is not a model name (no "..", no leading "/", no empty segments)`);
  if (!model) return refuse(404, "model_not_found", `model "${name}" is not on this node`);
  if (model.store !== "models-dir") {
    const owner = STORE_NAMES[model.store] ?? model.store;
    return refuse(403, "not_mesh_owned", `mesh only deletes what it downloaded into its models dir; this file belongs to ${owner} at ${model.path}; remove it with that tool`);
  }
  if (!model.pulled) return refuse(403, "not_downloaded_by_mesh", `mesh only deletes models it downloaded itself (mesh pull, or a copy from a peer); ${model.path} was put in the models dir some other way; remove the file yourself`);
  if (facts.pulling) return refuse(409, "model_pulling", `model "${name}" is being pulled; wait for the pull to end (or cancel it) first`);
  if (facts.loaded) return refuse(409, "model_loaded", `model "${name}" is loaded; unload it first (POST /api/v1/unload {"model_name": "${name}"}, or keep_alive 0)`);
  const mine = [...model.files, ...(model.mmproj ? [model.mmproj] : [])];
  if (mine.length === 0) return refuse(404, "model_not_found", `model "${name}" has no file on this node`);
  const outside = mine.find((f) => !isInside(facts.modelsDir, facts.realPath(f)));
  if (outside) return refuse(403, "outside_models_dir", `mesh only deletes what it downloaded into its models dir (${facts.modelsDir}); ${outside} lies outside it and is left alone`);
  const used = new Set(facts.others.filter((o) => o.name !== name).flatMap((o) => [...o.files, ...(o.mmproj ? [o.mmproj] : [])].map(facts.realPath)));
  const files: string[] = [];
  const kept: string[] = [];
  for (const f of new Set(mine.map(facts.realPath))) (used.has(f) ? kept : files).push(f);
  return { ok: true, name, files, kept };
}

/**
 * `models.json` without the entries for `name` or for any file in `removed` (real paths); other
 * entries are kept as they were written, fields we do not know included. Undefined: nothing changes.
 */
export function registryWithout(raw: Record<string, unknown>, name: string, removed: readonly string[], modelsDir: string, realPath: (file: string) => string): Record<string, unknown> | undefined {
  const gone = new Set(removed);
  const fileOf = (entry: unknown) => {
    const file = typeof entry === "object" && entry !== null ? (entry as { file?: unknown }).file : undefined;
    return typeof file === "string" ? realPath(isAbsolute(file) ? file : join(modelsDir, file)) : undefined;
  };
  const kept = Object.entries(raw).filter(([n, entry]) => {
    const file = fileOf(entry);
    return n !== name && !(file !== undefined && gone.has(file));
  });
  return kept.length === Object.keys(raw).length ? undefined : Object.fromEntries(kept);
}

/** Folders between each removed file and the models dir, deepest first: the ones left empty may go. */
export function foldersToPrune(modelsDir: string, removed: readonly string[]): string[] {
  const out = new Set<string>();
  for (const f of removed) {
    let dir = resolve(f, "..");
    while (isInside(modelsDir, dir)) {
      out.add(dir);
      dir = resolve(dir, "..");
    }
  }
  return [...out].sort((a, b) => b.length - a.length);
}
