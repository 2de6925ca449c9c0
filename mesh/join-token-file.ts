/**
 * The join token at rest: `<state-dir>/join-token`, mode 0600, rewritten at every start (addresses
 * change) and read by `mesh token` and `mesh status`. It carries the mesh secret, so it lives only
 * in the state dir: never in the log, never over HTTP.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { writePrivateFile } from "../base/private-file.ts";

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

type Out = { isTTY?: boolean; write(text: string): unknown };
const STD_STREAMS: readonly Out[] = [process.stdout, process.stderr];

/** The terminal a person reads, if any (stdout, else stderr): a log file or journal is none. */
export const terminalOf = (streams: readonly Out[] = STD_STREAMS): Out | undefined => streams.find((s) => s.isTTY);

/**
 * Shows tokens to a person at a terminal, each under its label (a new mesh's owner and guest
 * tokens, or one join token); a log file or journal gets nothing.
 */
export function showJoinTokens(tokens: readonly { label: string; token: string }[], streams: readonly Out[] = STD_STREAMS): boolean {
  const tty = terminalOf(streams);
  tty?.write(`${tokens.map((t) => `${t.label}: ${t.token}\n`).join("")}(kept in the state dir; \`mesh token\` prints the first again${tokens.length > 1 ? ", `mesh token --guest` makes more guest tokens" : ""})\n`);
  return tty !== undefined;
}
