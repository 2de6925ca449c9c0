/**
 * The join token at rest: `<state-dir>/join-token`, mode 0600, rewritten at every start (addresses
 * change) and read by `mesh token` and `mesh status`. It carries the mesh secret, so it lives only
 * in the state dir: never in the log, never over HTTP.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { writePrivateFile } from "../private-file.ts";

export const JOIN_TOKEN_FILE = "join-token";

export const joinTokenPath = (stateDir: string) => join(stateDir, JOIN_TOKEN_FILE);

/**
 * Writes the token whole and private (private-file.ts: a reader never sees half a token or a moment
 * of wider permissions). Returns whether the state dir had none before: the node's first start,
 * when the token is shown on the terminal.
 */
export function writeJoinToken(stateDir: string, token: string): { path: string; first: boolean } {
  const path = joinTokenPath(stateDir);
  const first = !existsSync(path);
  writePrivateFile(path, `${token}\n`);
  return { path, first };
}

/** The token this state dir's node wrote, or undefined when there is none or it cannot be read. */
export function readJoinToken(stateDir: string): string | undefined {
  try {
    return readFileSync(joinTokenPath(stateDir), "utf8").trim() || undefined;
  } catch {
    return undefined;
  }
}

/** Shows the token to a person at a terminal (stdout, else stderr); a log file or journal gets nothing. */
export function showJoinToken(token: string, streams: readonly { isTTY?: boolean; write(text: string): unknown }[] = [process.stdout, process.stderr]): boolean {
  const tty = streams.find((s) => s.isTTY);
  tty?.write(`Join token: ${token}\n(kept in the state dir; \`mesh token\` prints it again)\n`);
  return tty !== undefined;
}
