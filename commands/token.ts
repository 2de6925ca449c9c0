/**
 * `mesh token`: prints the join token the node keeps in its state dir, so whoever owns that dir
 * (and nobody who merely reaches the API) can let another machine join. On one of the owner's
 * machines that is the owner's token (the machine that joins with it is the owner's too);
 * `--guest` makes a new pass the roster signs and prints a guest's token, which carries the pass
 * and never the roster's key. A guest's node makes neither: only the owner invites.
 */
import { randomBytes } from "node:crypto";
import type { Config } from "../config/config.ts";
import { decodeJoinToken, type JoinToken } from "../mesh/join-token.ts";
import { readJoinToken } from "../mesh/join-token-file.ts";
import { readRosterKeys } from "../mesh/roster-files.ts";
import { guestToken, RosterError } from "../mesh/roster-setup.ts";
import { CommandError } from "./common.ts";

/** The token in the state dir, decoded: where this node is, its mesh's secret and line. */
export function keptToken(stateDir: string): { text: string; token: JoinToken } {
  const text = readJoinToken(stateDir);
  if (!text) throw new CommandError(`no join token in ${stateDir}: start the node first (or point --state-dir at its state dir)`);
  try {
    return { text, token: decodeJoinToken(text) };
  } catch (err) {
    throw new CommandError(`the join token in ${stateDir} does not read: ${(err as Error).message}`);
  }
}

export async function showToken(config: Pick<Config, "stateDir">, guest?: { name: string | undefined; lifetimeMs: number | undefined }): Promise<void> {
  const kept = keptToken(config.stateDir);
  let keys;
  try {
    keys = readRosterKeys(config.stateDir);
  } catch (err) {
    throw new CommandError((err as Error).message);
  }
  if (keys && !keys.secret) throw new CommandError("this node is a guest of its mesh: only the owner's machines make tokens (`mesh token --guest` on one of them)");
  if (!guest) return void console.log(kept.text);
  const name = guest.name ?? `guest-${randomBytes(2).toString("hex")}`;
  const expiresAt = guest.lifetimeMs === undefined ? undefined : Date.now() + guest.lifetimeMs;
  try {
    console.log(await guestToken(config.stateDir, kept.token, name, expiresAt));
  } catch (err) {
    if (err instanceof RosterError) throw new CommandError(err.message);
    throw err;
  }
}
