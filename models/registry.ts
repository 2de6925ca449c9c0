/**
 * The optional model registry, `models.json` in the models dir: per model a file, labels (which
 * set its type), and load defaults. It names models that have no file name worth typing, and marks
 * what GGUF metadata cannot say (an audio or image model, say). The operator writes it; mesh adds
 * the models it pulls or copies from a peer (with `ref` and `pulled`) and `mesh rm` takes them out
 * again, both through `updateRegistry`.
 *
 *   { "embed": { "file": "nomic-embed-text-v1.5.Q8_0.gguf", "labels": ["embedding"], "ctx_size": 8192 } }
 */
import { existsSync, mkdirSync, readFileSync, statSync } from "node:fs";
import { rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import lockfile from "proper-lockfile";
import { z } from "zod";
import { RECIPES } from "./recipe-devices.ts";

export const REGISTRY_FILE = "models.json";
/**
 * The models dir's scratch folder: pulls stage their files there, and a write of the registry
 * takes its lock and stages the new file there. A dot folder, so no scan lists what is in it.
 */
export const PULLS_DIR = ".pulls";

const RegistryEntry = z.object({
  /** Path of the model file (first shard), relative to the models dir or absolute. */
  file: z.string().min(1),
  labels: z.array(z.string()).default([]),
  recipe: z.enum(RECIPES).default("llamacpp"),
  mmproj: z.string().min(1).optional(),
  ctx_size: z.number().int().nonnegative().optional(),
  llamacpp_args: z.string().optional(),
  /** A model of this node (by name) that drafts for this one in speculative decoding; the load's `draft_model` wins. */
  draft: z.string().min(1).max(512).optional(),
  /** Where the file can be downloaded from (e.g. a Hugging Face resolve URL). */
  source: z.string().url().optional(),
  /** The reference it was pulled by (`org/repo/file.gguf`, a URL): what other nodes pull it by. */
  ref: z.string().min(1).max(2048).optional(),
  /** Its files were downloaded by `mesh pull`, so `mesh rm` may remove them. */
  pulled: z.boolean().optional(),
});

export const Registry = z.record(z.string().min(1), RegistryEntry);
export type RegistryEntry = z.infer<typeof RegistryEntry>;
export type Registry = z.infer<typeof Registry>;

/** Reads the registry; an absent file is an empty registry, a bad one is an error that names it. */
export function readRegistry(path: string): Registry {
  if (!existsSync(path)) return {};
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    throw new Error(`${path} is not valid JSON: ${(err as Error).message}`);
  }
  const parsed = Registry.safeParse(json);
  if (!parsed.success) throw new Error(`${path}: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}

/**
 * Rewrites models.json in `modelsDir` by `change`, which gets the file as written (fields we do
 * not know, and no defaults filled in) and returns the next one, or undefined to leave it. Under a
 * lock, so that writers at once (two pulls, a pull and a delete) all land; the result must still
 * be a valid registry; the file is replaced by a rename, keeping its mode, so a reader sees the
 * old registry or the new one.
 */
export async function updateRegistry(modelsDir: string, change: (raw: Record<string, unknown>) => Record<string, unknown> | undefined): Promise<void> {
  const path = join(modelsDir, REGISTRY_FILE);
  mkdirSync(join(modelsDir, PULLS_DIR), { recursive: true });
  const release = await lockfile.lock(modelsDir, {
    lockfilePath: join(modelsDir, PULLS_DIR, `${REGISTRY_FILE}.lock`),
    realpath: false,
    stale: 30_000,
    retries: { retries: 200, minTimeout: 50, maxTimeout: 500 },
  });
  try {
    const exists = existsSync(path);
    const next = change(exists ? (JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>) : {});
    if (next === undefined) return;
    if (!Registry.safeParse(next).success) throw new Error(`${path} would not be valid after this change; it was left as it is`);
    const tmp = join(modelsDir, PULLS_DIR, `${REGISTRY_FILE}.${process.pid}.tmp`);
    await writeFile(tmp, `${JSON.stringify(next, null, 2)}\n`, exists ? { mode: statSync(path).mode & 0o777 } : {});
    await rename(tmp, path);
  } finally {
    await release();
  }
}

/** Sets one entry of models.json (its `mmproj` replaced, its other fields kept), leaving every other entry as it was written. */
export function writeRegistryEntry(modelsDir: string, name: string, entry: Pick<RegistryEntry, "file" | "mmproj" | "ref" | "pulled">): Promise<void> {
  return updateRegistry(modelsDir, (raw) => {
    const before = raw[name];
    const { mmproj: _dropped, ...kept } = before && typeof before === "object" ? (before as Record<string, unknown>) : {};
    return { ...raw, [name]: { ...kept, ...entry } };
  });
}
