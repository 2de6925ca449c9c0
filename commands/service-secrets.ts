/**
 * Writes and removes the service's environment file (service/env-file.ts says what is in it). The
 * file is private from its first byte and replaced whole (private-file.ts), so there is no moment
 * when another user could read it, and a link left at either name is never followed. Only a file
 * mesh wrote is ever replaced or removed.
 */
import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { dirname } from "node:path";
import { writePrivateFile } from "../base/private-file.ts";
import { isMeshEnvFile } from "../service/env-file.ts";
import type { Account } from "./service-account.ts";
import { CommandError } from "./common.ts";

/** Refuses, before anything is written, to replace a file at `path` that mesh did not write. */
export function checkEnvFileOurs(path: string): void {
  if (!existsSync(path)) return;
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new CommandError(`cannot read ${path}: ${(err as Error).message}`);
  }
  if (!isMeshEnvFile(text)) throw new CommandError(`${path} was not written by \`mesh service install\`; refusing to replace it (move it away first)`);
}

/** Writes `text` to `path`, mode 0600, owned by `owner` (else by whoever runs this). */
export function writeEnvFile(path: string, text: string, owner?: Account): void {
  try {
    // A new state dir is 0700, as the node makes it; the folders above it are left as mkdir makes them.
    const dir = dirname(path);
    mkdirSync(dirname(dir), { recursive: true });
    if (!existsSync(dir)) mkdirSync(dir, { mode: 0o700 });
    writePrivateFile(path, text, { owner });
  } catch (err) {
    throw new CommandError(`cannot write ${path}, which holds the service's secrets: ${(err as Error).message}`);
  }
}

/** Removes the environment file a previous install wrote, when it is still ours; says so. */
export function removeEnvFile(path: string): void {
  try {
    if (!isMeshEnvFile(readFileSync(path, "utf8"))) return;
    rmSync(path);
    console.log(`removed ${path}`);
  } catch {
    // gone already, or not ours to read
  }
}
