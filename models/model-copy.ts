/**
 * A second name for a model already on disk (Ollama's `/api/copy`): each of its files hard-linked
 * into the models dir under the names a model called `dest` has there (`arrivalName`), so the copy
 * costs no disk and the next scan finds it like any other file. The name comes from a request, so
 * it must be one plain file-name segment; nothing is ever written over, and a copy that fails
 * halfway removes the links it made.
 */
import { linkSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { ModelInfo } from "./model-store.ts";
import { arrivalName, isSafeModelName } from "./model-transfer.ts";

export class ModelCopyError extends Error {
  constructor(
    message: string,
    readonly status: 400 | 404 | 409 | 500,
  ) {
    super(message);
  }
}

/** The links a copy of `model` named `dest` makes: [existing file, new name in the models dir] (pure). */
export function copyPlan(model: Pick<ModelInfo, "name" | "files" | "mmproj" | "problem">, dest: string): [from: string, to: string][] {
  if (dest.includes("/") || !isSafeModelName(dest)) throw new ModelCopyError(`"${dest}" cannot be a model name: use one plain file name (no "/", not starting with "." )`, 400);
  if (model.problem) throw new ModelCopyError(`model "${model.name}" cannot be copied: ${model.problem}`, 409);
  if (model.files.length === 0) throw new ModelCopyError(`model "${model.name}" has no file on this node`, 404);
  const plan: [string, string][] = model.files.map((f) => [f, arrivalName(dest, f, "model")]);
  if (model.mmproj) plan.push([model.mmproj, arrivalName(dest, model.mmproj, "projector")]);
  return plan;
}

/** Makes the links of `copyPlan`; throws without leaving any behind when one cannot be made. */
export function linkModelAs(model: ModelInfo, dest: string, modelsDir: string): void {
  const made: string[] = [];
  try {
    for (const [from, name] of copyPlan(model, dest)) {
      const to = join(modelsDir, name);
      linkSync(from, to);
      made.push(to);
    }
  } catch (err) {
    for (const path of made) rmSync(path, { force: true });
    if (err instanceof ModelCopyError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "EEXIST") throw new ModelCopyError(`a model named "${dest}" (or one of its files) already exists in the models dir; nothing was replaced`, 409);
    if (code === "EXDEV") throw new ModelCopyError(`the files of "${model.name}" are on another filesystem than the models dir; copy them there by hand`, 409);
    throw new ModelCopyError(`could not copy "${model.name}" to "${dest}": ${(err as Error).message}`, 500);
  }
}
