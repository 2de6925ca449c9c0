/**
 * `mesh token`: prints the join token the node keeps in its state dir, so whoever owns that dir
 * (and nobody who merely reaches the API) can let another machine join.
 */
import type { Config } from "../config/config.ts";
import { readJoinToken } from "../mesh/join-token-file.ts";
import { CommandError } from "./common.ts";

export function showToken(config: Pick<Config, "stateDir">): void {
  const token = readJoinToken(config.stateDir);
  if (!token) throw new CommandError(`no join token in ${config.stateDir}: start the node first (or point --state-dir at its state dir)`);
  console.log(token);
}
