/**
 * The catalog of well-known models that can be pulled by a short id (`mesh pull
 * qwen2.5-7b-instruct`): data in known-models.json, one Hugging Face GGUF repository each with its
 * default quant, the approximate download size of that quant (model and projector) and the
 * context length it was trained for, so a listing can say which of them fit a mesh's memory.
 */
import { z } from "zod";
import data from "./known-models.json";

const KnownModelSchema = z.object({
  /** What a user types: lowercase, no slash (a slash makes it a Hugging Face reference). */
  id: z.string().regex(/^[a-z0-9][a-z0-9._-]{0,63}$/),
  repo: z.string().regex(/^[\w.-]+\/[\w.-]+$/),
  quant: z.string().regex(/^[A-Za-z0-9_-]{1,32}$/),
  sizeBytes: z.int().positive(),
  contextLength: z.int().positive(),
  description: z.string().min(1).max(200),
});
export type KnownModel = z.infer<typeof KnownModelSchema>;

// The file ships inside the binary; a bad edit to it fails here, at the first use, with the entry named.
let parsed: readonly KnownModel[] | undefined;

export function knownModels(): readonly KnownModel[] {
  parsed ??= Object.freeze(z.array(KnownModelSchema).parse(data).map((m) => Object.freeze(m)));
  return parsed;
}

/** The catalog entry of `id` (case does not matter), or undefined. */
export function findKnownModel(id: string): KnownModel | undefined {
  const want = id.trim().toLowerCase();
  return knownModels().find((m) => m.id === want);
}
