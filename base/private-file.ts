/**
 * Files that hold secrets (the join token, the service's environment file), written so that no
 * other user can read them at any moment and no reader sees half of one: a fresh temporary name
 * created exclusively with mode 0600, written and synced, then renamed over the old file.
 */
import { randomBytes } from "node:crypto";
import { closeSync, fchmodSync, fchownSync, fsyncSync, openSync, renameSync, rmSync, writeSync } from "node:fs";

export interface PrivateFileOptions {
  /** Who owns the file (root writing a file for the service's user); else whoever writes it. */
  owner?: { uid: number; gid: number };
}

/** Replaces `path` with `text`, mode 0600. Throws the underlying error; the temporary file is gone then. */
export function writePrivateFile(path: string, text: string, opts: PrivateFileOptions = {}): void {
  // A random name, so a temporary file left by a crash (or placed by someone else) is never in the way;
  // O_EXCL never opens a file or a link already there.
  const tmp = `${path}.${process.pid}.${randomBytes(6).toString("hex")}.tmp`;
  try {
    const fd = openSync(tmp, "wx", 0o600);
    try {
      // The umask can only take bits away; this makes it exactly 0600 whatever it is.
      fchmodSync(fd, 0o600);
      // On the descriptor, before the file has its real name: it never appears there with the wrong owner.
      if (opts.owner) fchownSync(fd, opts.owner.uid, opts.owner.gid);
      writeSync(fd, text);
      // Before the rename, so a crash leaves the old file or the whole new one, never an empty one.
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
}
