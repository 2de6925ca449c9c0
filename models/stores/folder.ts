/**
 * A folder of GGUF files scanned like the models dir (LM Studio's `<publisher>/<repo>/<file>.gguf`,
 * a MESH_MODEL_STORES folder): every `.gguf` up to a few folders deep whose first bytes say GGUF,
 * named by its file name (qualified by its folder when two share one).
 */
import { join } from "node:path";
import { modelsOfFiles, type StoreFile, type StoreModel } from "./stores.ts";
import { isWatchedGguf, walkGguf, type ScanState } from "./walk.ts";

/** The GGUF files under `root`, keyed by their path below it. */
export function folderFiles(root: string, scan: ScanState, maxDepth?: number): StoreFile[] {
  return walkGguf(root, scan, maxDepth)
    .map((rel) => ({ rel, real: join(root, rel) }))
    .filter((f) => isWatchedGguf(f.real, scan));
}

export function scanFolder(root: string, scan: ScanState): StoreModel[] {
  return modelsOfFiles(folderFiles(root, scan));
}
