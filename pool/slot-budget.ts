/**
 * Which saved slot files stay (pure): the node's disk budget for them holds across every model,
 * and the files used longest ago go first (a restore counts as a use). Restores take the newest
 * files first, one per slot of the server.
 */

export interface SavedSlot {
  path: string;
  bytes: number;
  /** When it was last saved or restored (ms). */
  usedAt: number;
}

const newestFirst = (a: SavedSlot, b: SavedSlot) => b.usedAt - a.usedAt || a.path.localeCompare(b.path);

/** The files to delete so that what is left fits in `budgetBytes`: least recently used first. */
export function overBudget(files: readonly SavedSlot[], budgetBytes: number): string[] {
  let total = files.reduce((sum, f) => sum + f.bytes, 0);
  const out: string[] = [];
  for (const f of [...files].sort(newestFirst).reverse()) {
    if (total <= budgetBytes) break;
    out.push(f.path);
    total -= f.bytes;
  }
  return out;
}

/** The files a server with `slots` slots gets back when it loads: the newest, one per slot. */
export function toRestore(files: readonly SavedSlot[], slots: number): SavedSlot[] {
  return [...files].sort(newestFirst).slice(0, Math.max(0, slots));
}
