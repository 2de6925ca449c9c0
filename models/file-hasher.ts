/**
 * SHA-256 of files on disk, kept per path, size and mtime: a multi-GB model is read once per
 * version. With a cache file (in the node's state dir) what was worked out outlives the process,
 * so a restart does not read every model again to announce its content identity or list it to a
 * peer; a hash a verified install already knows is noted without reading the file at all.
 */
import { readFileSync, statSync } from "node:fs";
import { stat } from "node:fs/promises";
import { z } from "zod";
import { writePrivateFile } from "../base/private-file.ts";
import { hashFileInto, SHA256_HEX } from "./model-transfer.ts";

/** Files whose hashes the cache file keeps at most: far more than a models dir holds. */
const MAX_CACHED = 10_000;
const SAVE_AFTER_MS = 1_000;

const CacheFile = z.object({
  v: z.literal(1),
  files: z.record(z.string(), z.object({ key: z.string(), sha256: z.string().regex(SHA256_HEX) })),
});

// The inode and ctime too: a file replaced by one of the same size and mtime (`cp -p`, `rsync -a`)
// is another file, and ctime is not one a user can set.
export const fileVersion = (s: { size: number; mtimeMs: number; ctimeMs: number; ino: number; dev: number }) => `${s.size}:${s.mtimeMs}:${s.ctimeMs}:${s.ino}:${s.dev}`;

export class FileHasher {
  private readonly cache = new Map<string, { key: string; sha256: string }>();
  // Two peers asking for the same file at once share one pass over it.
  private readonly running = new Map<string, Promise<{ size: number; sha256: string }>>();
  private saveTimer: Timer | undefined;

  /** `cacheFile`: where hashes are kept across restarts (none: in this process only). */
  constructor(private readonly cacheFile?: string) {
    if (!cacheFile) return;
    try {
      const parsed = CacheFile.safeParse(JSON.parse(readFileSync(cacheFile, "utf8")));
      // Unreadable or of another shape: worked out again, as on a first start.
      if (parsed.success) for (const [path, entry] of Object.entries(parsed.data.files).slice(0, MAX_CACHED)) this.cache.set(path, entry);
    } catch {
      // none yet
    }
  }

  async digest(path: string): Promise<{ size: number; sha256: string }> {
    const before = await stat(path);
    const key = fileVersion(before);
    const hit = this.cache.get(path);
    if (hit?.key === key) return { size: before.size, sha256: hit.sha256 };
    const runKey = `${path}\0${key}`;
    const running = this.running.get(runKey);
    if (running) return running;
    const work = (async () => {
      const hasher = new Bun.CryptoHasher("sha256");
      await hashFileInto(hasher, path, before.size);
      const sha256 = hasher.digest("hex");
      // A file written while we read it has no hash worth remembering.
      if (fileVersion(await stat(path)) === key) this.keep(path, { key, sha256 });
      return { size: before.size, sha256 };
    })();
    this.running.set(runKey, work);
    try {
      return await work;
    } finally {
      this.running.delete(runKey);
    }
  }

  /** Notes the hash of a file this node just checked while writing it (an install): it is not read again for it. */
  remember(path: string, sha256: string): void {
    try {
      this.keep(path, { key: fileVersion(statSync(path)), sha256 });
    } catch {
      // gone already: nothing to remember
    }
  }

  private keep(path: string, entry: { key: string; sha256: string }): void {
    this.cache.delete(path);
    this.cache.set(path, entry);
    // The oldest go first when a models dir churns through more files than the bound.
    while (this.cache.size > MAX_CACHED) this.cache.delete(this.cache.keys().next().value!);
    if (this.cacheFile && !this.saveTimer) {
      this.saveTimer = setTimeout(() => this.save(), SAVE_AFTER_MS);
      this.saveTimer.unref();
    }
  }

  private save(): void {
    this.saveTimer = undefined;
    try {
      writePrivateFile(this.cacheFile!, JSON.stringify({ v: 1, files: Object.fromEntries(this.cache) }));
    } catch {
      // A state dir we cannot write to costs a read of each model on the next start, nothing more.
    }
  }
}
