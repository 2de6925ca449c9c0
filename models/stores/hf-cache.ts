/**
 * The Hugging Face hub cache (huggingface_hub, `huggingface-cli download`, llama.cpp's `-hf` since
 * it moved there): `models--<org>--<repo>/snapshots/<revision>/<path in repo>`, each file a link into
 * `blobs/`. A repo's files are taken from every snapshot, the one `refs/main` names first, then the
 * newest: a file downloaded at an older revision is still there to serve. Models are named by their
 * path `org/repo/<path in repo>` (so by file name, qualified by `org/repo` when two repos share one),
 * and llama-server is given the snapshot's link, which keeps the file name a split model needs.
 */
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { modelsOfFiles, type StoreFile, type StoreModel } from "./stores.ts";
import { isWatchedGguf, readDir, walkGguf, watchPath, type ScanState } from "./walk.ts";

/** Snapshots read per repo: one per revision the user downloaded at; more is a cache gone wild. */
const MAX_SNAPSHOTS = 32;
const REF_MAX_BYTES = 256;

/** `models--org--repo` -> `org/repo` (pure); undefined for other folders (datasets, spaces, junk). */
export function repoOfFolder(folder: string): string | undefined {
  if (!folder.startsWith("models--")) return undefined;
  const parts = folder.slice("models--".length).split("--");
  if (parts.length > 2 || !parts.every((p) => /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,95}$/.test(p) && !p.includes(".."))) return undefined;
  return parts.join("/");
}

/** The commit `refs/main` names, if it names one. */
function mainRevision(repoDir: string, scan: ScanState): string | undefined {
  const ref = join(repoDir, "refs", "main");
  watchPath(ref, scan);
  try {
    if (statSync(ref).size > REF_MAX_BYTES) return undefined;
    const text = readFileSync(ref, "utf8").trim();
    return /^[0-9a-f]{40}$/.test(text) ? text : undefined;
  } catch {
    return undefined;
  }
}

const mtimeOf = (path: string) => {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return 0;
  }
};

/** The GGUF files of every model repo in the cache at `root`, keyed `org/repo/<path in repo>`. */
export function hfCacheFiles(root: string, scan: ScanState): StoreFile[] {
  const out: StoreFile[] = [];
  for (const entry of readDir(root, scan)) {
    const repo = entry.isDirectory() ? repoOfFolder(entry.name) : undefined;
    if (!repo) continue;
    const repoDir = join(root, entry.name);
    const snapshots = join(repoDir, "snapshots");
    const main = mainRevision(repoDir, scan);
    const revisions = readDir(snapshots, scan)
      .filter((e) => e.isDirectory() && !e.name.startsWith("."))
      .map((e) => ({ name: e.name, mtime: mtimeOf(join(snapshots, e.name)) }))
      .sort((a, b) => Number(b.name === main) - Number(a.name === main) || b.mtime - a.mtime || (a.name < b.name ? -1 : 1))
      .slice(0, MAX_SNAPSHOTS);
    const seen = new Set<string>();
    for (const rev of revisions) {
      const dir = join(snapshots, rev.name);
      for (const rel of walkGguf(dir, scan)) {
        if (seen.has(rel)) continue;
        const real = join(dir, rel);
        // A link whose blob is gone (or not a GGUF) is passed over; an older snapshot may have it.
        if (!isWatchedGguf(real, scan)) continue;
        seen.add(rel);
        out.push({ rel: `${repo}/${rel}`, real });
      }
    }
  }
  return out;
}

export function scanHfCache(root: string, scan: ScanState): StoreModel[] {
  return modelsOfFiles(hfCacheFiles(root, scan));
}
