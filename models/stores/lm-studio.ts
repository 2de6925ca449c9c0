/**
 * LM Studio's models folder (`~/.lmstudio/models`, before 0.3 `~/.cache/lm-studio/models`):
 * `<publisher>/<repo>/<file>.gguf`, plain files LM Studio downloaded or the user imported. It is a
 * folder of GGUFs like the models dir, and is read as one; projectors (`mmproj-*.gguf`) pair with the
 * model beside them.
 */
import type { StoreModel } from "./stores.ts";
import { scanFolder } from "./folder.ts";
import type { ScanState } from "./walk.ts";

export function scanLmStudio(root: string, scan: ScanState): StoreModel[] {
  return scanFolder(root, scan);
}
