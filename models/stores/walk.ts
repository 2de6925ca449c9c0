/**
 * The file-system side the store scanners share: reading folders within a bound (entries per scan,
 * depth), telling a GGUF by its 4-byte magic, and remembering what a scan read (a stat fingerprint
 * per folder and file) so that a store is read again only when one of those has changed. Nothing
 * here writes: another tool's store is only ever read.
 */
import { closeSync, openSync, readdirSync, readSync, statSync, type Dirent } from "node:fs";
import { join } from "node:path";

/** What a scan's result depends on: path -> stat fingerprint ("absent" when it was not there). */
export type Watched = Map<string, string>;

/** Directory entries one scan of one store may read: a home folder can hold anything. */
const MAX_ENTRIES = 50_000;
/** Folders below a store's root (or a snapshot's) that are walked: model folders are shallow. */
const MAX_DEPTH = 4;

export interface ScanState {
  watched: Watched;
  /** Directory entries this scan may still read. */
  entriesLeft: number;
}

export const newScan = (): ScanState => ({ watched: new Map(), entriesLeft: MAX_ENTRIES });

function fingerprint(path: string): string {
  try {
    const st = statSync(path);
    return `${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
  } catch {
    return "absent";
  }
}

/** Whether everything a scan read is as it was (a file added or removed changes its folder's mtime). */
export function unchanged(watched: Watched): boolean {
  for (const [path, fp] of watched) if (fingerprint(path) !== fp) return false;
  return true;
}

/** Remembers a path whose stat (a file's contents, a folder's list) the scan depends on, without reading it. */
export function watchPath(path: string, scan: ScanState): void {
  scan.watched.set(path, fingerprint(path));
}

/** The entries of `dir`, sorted by name, within the scan's bound; none when it cannot be read. */
export function readDir(dir: string, scan: ScanState): Dirent[] {
  // Fingerprint first: a change between the two is seen by the next check, never lost.
  scan.watched.set(dir, fingerprint(dir));
  if (scan.entriesLeft <= 0) return [];
  let entries: Dirent[];
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
  // Sorted before the cut so that a store over the bound always shows the same part.
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const kept = entries.slice(0, scan.entriesLeft);
  scan.entriesLeft -= kept.length;
  return kept;
}

const isGgufName = (name: string) => /\.gguf$/i.test(name);

/**
 * Paths (relative to `root`) of the `.gguf` entries under it, files or links to files; dot entries
 * are skipped like in the models dir, and linked folders are not entered (no loops).
 */
export function walkGguf(root: string, scan: ScanState, maxDepth = MAX_DEPTH): string[] {
  const out: string[] = [];
  const walk = (dir: string, rel: string, depth: number) => {
    for (const entry of readDir(dir, scan)) {
      if (entry.name.startsWith(".")) continue;
      const childRel = rel ? `${rel}/${entry.name}` : entry.name;
      if (entry.isDirectory()) {
        if (depth < maxDepth) walk(join(dir, entry.name), childRel, depth + 1);
      } else if (isGgufName(entry.name) && (entry.isFile() || entry.isSymbolicLink())) out.push(childRel);
    }
  };
  walk(root, "", 0);
  return out;
}

const MAGIC = [0x47, 0x47, 0x55, 0x46]; // "GGUF"

/** Whether `path` is (or links to) a regular file that starts with the GGUF magic. */
function isGgufFile(path: string): boolean {
  let fd: number | undefined;
  try {
    if (!statSync(path).isFile()) return false;
    fd = openSync(path, "r");
    const head = new Uint8Array(4);
    return readSync(fd, head, 0, 4, 0) === 4 && MAGIC.every((b, i) => head[i] === b);
  } catch {
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** `isGgufFile`, its stat remembered: a file still being written in place is looked at again when it changes. */
export function isWatchedGguf(path: string, scan: ScanState): boolean {
  watchPath(path, scan);
  return isGgufFile(path);
}
