/**
 * llama.cpp's download cache (`$LLAMA_CACHE`, else `~/.cache/llama.cpp`): older llama.cpp saved
 * `-hf`/`-mu` downloads there as flat files (`org_repo_file.gguf`, beside `.json` and `.etag`
 * notes); newer llama.cpp keeps them in the Hugging Face cache layout, which is there too when
 * LLAMA_CACHE points it here. Both are read: the flat files by name, the layout as the Hugging Face
 * cache is.
 */
import type { StoreModel } from "./stores.ts";
import { modelsOfFiles } from "./stores.ts";
import { folderFiles } from "./folder.ts";
import { hfCacheFiles } from "./hf-cache.ts";
import type { ScanState } from "./walk.ts";

export function scanLlamaCache(root: string, scan: ScanState): StoreModel[] {
  // Only the top level holds flat downloads; folders are the cache layout's (or not ours).
  return modelsOfFiles([...folderFiles(root, scan, 0), ...hfCacheFiles(root, scan)]);
}
