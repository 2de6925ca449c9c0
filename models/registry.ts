/**
 * The optional model registry, `models.json` in the models dir: per model a file, labels (which
 * set its type), and load defaults. It names models that have no file name worth typing, and marks
 * what GGUF metadata cannot say (an audio or image model, say).
 *
 *   { "embed": { "file": "nomic-embed-text-v1.5.Q8_0.gguf", "labels": ["embedding"], "ctx_size": 8192 } }
 */
import { existsSync, readFileSync } from "node:fs";
import { z } from "zod";
import { RECIPES } from "../pool/devices.ts";

export const REGISTRY_FILE = "models.json";

const RegistryEntry = z.object({
  /** Path of the model file (first shard), relative to the models dir or absolute. */
  file: z.string().min(1),
  labels: z.array(z.string()).default([]),
  recipe: z.enum(RECIPES).default("llamacpp"),
  mmproj: z.string().min(1).optional(),
  ctx_size: z.number().int().nonnegative().optional(),
  llamacpp_args: z.string().optional(),
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
