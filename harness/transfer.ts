/** Temporary folders and checks shared by the model-transfer tests. */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A root folder with numbered subfolders; `remove` cleans it all (call it from afterAll). */
export function tempDirs(prefix: string) {
  const root = mkdtempSync(join(tmpdir(), prefix));
  let n = 0;
  return {
    fresh(label: string): string {
      const dir = join(root, `${label}-${++n}`);
      mkdirSync(dir, { recursive: true });
      return dir;
    },
    remove: () => rmSync(root, { recursive: true, force: true }),
  };
}

export const sha256 = (bytes: Uint8Array) => new Bun.CryptoHasher("sha256").update(bytes).digest("hex");

/** Partial files left in a destination folder. */
export const partsIn = (dir: string) => (existsSync(join(dir, ".partial")) ? readdirSync(join(dir, ".partial")).filter((f) => f.endsWith(".part")) : []);
