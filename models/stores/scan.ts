/**
 * Scans the stores, each only when something it read has changed since its last scan (a folder's
 * or a manifest's stat): the model store rescans on every listing, and a Hugging Face cache or an
 * Ollama store can hold many folders.
 */
import { scanFolder } from "./folder.ts";
import { scanHfCache } from "./hf-cache.ts";
import { scanLlamaCache } from "./llama-cache.ts";
import { scanLmStudio } from "./lm-studio.ts";
import { scanOllama } from "./ollama.ts";
import type { StoreKind, StoreModel, StoreRoot } from "./stores.ts";
import { newScan, unchanged, type ScanState, type Watched } from "./walk.ts";

const SCANNERS: Record<StoreKind, (root: string, scan: ScanState) => StoreModel[]> = {
  ollama: scanOllama,
  "lm-studio": scanLmStudio,
  huggingface: scanHfCache,
  "llama.cpp": scanLlamaCache,
  extra: scanFolder,
};

export class StoreScanner {
  private readonly cache = new Map<string, { models: StoreModel[]; watched: Watched }>();

  /** The models in `root` (from the last scan while nothing it read has changed). */
  scan(root: StoreRoot): readonly StoreModel[] {
    const key = `${root.kind}\0${root.dir}`;
    const hit = this.cache.get(key);
    if (hit && unchanged(hit.watched)) return hit.models;
    const scan = newScan();
    const models = SCANNERS[root.kind](root.dir, scan);
    this.cache.set(key, { models, watched: scan.watched });
    return models;
  }
}
