/**
 * Unpacks a release archive (`.tar.gz` with node-tar, `.zip` with extract-zip) and finds the folder
 * in it that holds the executables: upstream tarballs wrap everything in a versioned top folder,
 * zips are flat, and the shared libraries sit beside the binaries, so that whole folder is the build.
 */
import { readdirSync } from "node:fs";
import { join, resolve } from "node:path";
import extractZip from "extract-zip";
import * as tar from "tar";
import { findLlamaBinaries, type LlamaBinaries } from "./binaries.ts";

export async function extractArchive(file: string, destDir: string): Promise<void> {
  if (/\.zip$/i.test(file)) return extractZip(file, { dir: resolve(destDir) });
  if (/\.(tar\.gz|tgz)$/i.test(file)) return tar.extract({ file, cwd: destDir, strict: true });
  throw new Error(`${file}: not a .tar.gz or .zip archive`);
}

/** The binaries anywhere in `root` (a few levels down at most), or null. */
export function findBinariesBelow(root: string, depth = 4): LlamaBinaries | null {
  const here = findLlamaBinaries(root);
  if (here || depth === 0) return here;
  for (const entry of readdirSync(root, { withFileTypes: true })) {
    if (!entry.isDirectory()) continue;
    const found = findBinariesBelow(join(root, entry.name), depth - 1);
    if (found) return found;
  }
  return null;
}
