/**
 * Other tools' model stores that mesh serves from in place (pure): which exist and where (from the
 * environment, as each tool itself decides), and what each of their models is called here.
 *
 * Naming rule (the README says the same):
 *  1. Within a store, a model has the name that store gives it: Ollama's own name (`qwen2.5:0.5b`,
 *     `ns/model:tag`, `hf.co/org/repo:Q4_K_M`; the tag `latest` left out, as mesh's names carry no
 *     `:latest`); in the other stores the file name without `.gguf` (and without a split's
 *     `-0000N-of-0000M`), like in the models dir. Two models of one store with the same file name
 *     are told apart by their folder: `<folder>/<stem>` (in the Hugging Face cache the folder is
 *     `org/repo[/subfolder]`).
 *  2. mesh's own models (the models dir, its models.json, `--model PATH`) take their names first.
 *  3. Then the stores, in this order: ollama, lm-studio, huggingface, llama.cpp, then each
 *     MESH_MODEL_STORES folder in the order given. A model whose name is taken already gets
 *     `<name>@<store>` (`llama3.2@ollama`, `Qwen2.5-0.5B-Instruct-Q4_K_M@huggingface`), and if that
 *     is taken too (two folders of one kind), `<name>@<store>-2`, `-3`, ... in scan order.
 *  4. A file already listed (the same real file, through a link or a store given twice) is listed
 *     once, under the first name it got; within one store, two names of one file (two Ollama tags
 *     of the same blob) are both kept.
 * The names are stable while the stores hold the same models: the order is fixed and every folder
 * is read sorted by name.
 */
import { join, resolve } from "node:path";
import { groupModelFiles } from "../model-files.ts";
import { isSafeModelName } from "../model-transfer.ts";

/** Where a model's files are listed from: mesh's models dir, a `--model` path, or another tool's store. */
export type ModelStoreKind = "models-dir" | "path" | "ollama" | "lm-studio" | "huggingface" | "llama.cpp" | "extra";

/** A store mesh reads but does not own. */
export type StoreKind = Exclude<ModelStoreKind, "models-dir" | "path">;

export interface StoreRoot {
  kind: StoreKind;
  /** Absolute folder. */
  dir: string;
}

/** A model one store holds, named as that store names it (rule 1). */
export interface StoreModel {
  name: string;
  /** Absolute path given to llama-server `-m`: the model or its first shard, in the store as it lies. */
  path: string;
  files: string[];
  mmproj: string | undefined;
  missingShards: number[];
}

/** A GGUF found in a store: `rel` names it (a path-like key, rule 1), `real` is where it lies. */
export interface StoreFile {
  rel: string;
  real: string;
}

type Env = Record<string, string | undefined>;

const set = (env: Env, key: string): string | undefined => (env[key] ? env[key] : undefined);

/** The Hugging Face hub cache, found as huggingface_hub (and llama.cpp) find it. */
export function hfHubCacheDir(env: Env, home: string): string {
  const hfHome = set(env, "HF_HOME") ?? join(set(env, "XDG_CACHE_HOME") ?? join(home, ".cache"), "huggingface");
  return set(env, "HF_HUB_CACHE") ?? set(env, "HUGGINGFACE_HUB_CACHE") ?? join(hfHome, "hub");
}

/** llama.cpp's cache (`-hf` and `-mu` downloads), found as llama.cpp's `fs_get_cache_directory` finds it. */
export function llamaCacheDir(env: Env, home: string, platform: NodeJS.Platform): string {
  const explicit = set(env, "LLAMA_CACHE");
  if (explicit) return explicit;
  if (platform === "darwin") return join(home, "Library", "Caches", "llama.cpp");
  if (platform === "win32") return join(set(env, "LOCALAPPDATA") ?? join(home, "AppData", "Local"), "llama.cpp");
  return join(set(env, "XDG_CACHE_HOME") ?? join(home, ".cache"), "llama.cpp");
}

/** Every store to scan, in naming order (rule 3); a folder named twice is scanned once, as its first kind. */
export function modelStoreRoots(env: Env, home: string, extra: readonly string[], platform: NodeJS.Platform): StoreRoot[] {
  const roots: StoreRoot[] = [
    { kind: "ollama", dir: set(env, "OLLAMA_MODELS") ?? join(home, ".ollama", "models") },
    { kind: "lm-studio", dir: join(home, ".lmstudio", "models") },
    { kind: "lm-studio", dir: join(home, ".cache", "lm-studio", "models") },
    { kind: "huggingface", dir: hfHubCacheDir(env, home) },
    { kind: "llama.cpp", dir: llamaCacheDir(env, home, platform) },
    ...extra.map((dir): StoreRoot => ({ kind: "extra", dir })),
  ];
  const seen = new Set<string>();
  return roots
    .map((r) => ({ ...r, dir: resolve(r.dir) }))
    .filter((r) => !seen.has(r.dir) && (seen.add(r.dir), true));
}

/** `MESH_MODEL_STORES` / `--model-stores`: folders separated by `:` (as in PATH); empty parts ignored. */
export function parseStoreList(text: string): string[] {
  return text.split(":").map((t) => t.trim()).filter(Boolean);
}

/**
 * The name a store's model is listed under (rules 2 and 3), given the names taken so far; undefined
 * when no safe name can be made (a name no file or announcement could carry).
 */
export function storeModelName(name: string, store: StoreKind, taken: { has(name: string): boolean }): string | undefined {
  const safe = (n: string) => isSafeModelName(n);
  if (!safe(name)) return undefined;
  if (!taken.has(name)) return name;
  const suffixed = `${name}@${store}`;
  for (let i = 1; i < 1000; i++) {
    const candidate = i === 1 ? suffixed : `${suffixed}-${i}`;
    if (!safe(candidate)) return undefined;
    if (!taken.has(candidate)) return candidate;
  }
  return undefined;
}

/** Files of a store grouped into models (split shards, projectors) and named by their `rel` (rule 1). */
export function modelsOfFiles(files: readonly StoreFile[]): StoreModel[] {
  const realOf = new Map(files.map((f) => [f.rel, f.real]));
  const real = (rel: string) => realOf.get(rel)!;
  return groupModelFiles(files.map((f) => f.rel)).map((g) => ({
    name: g.name,
    path: real(g.path),
    files: g.files.map(real),
    mmproj: g.mmproj === undefined ? undefined : real(g.mmproj),
    missingShards: g.missingShards,
  }));
}
