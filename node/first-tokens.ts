/**
 * The tokens a person at the terminal gets on a mesh's first start: a new mesh's owner's and a
 * guest's (a pass named "guest", made only when someone is there to see it), else the one token.
 * Logs never carry a token (it holds the mesh secret): only a terminal sees it, once.
 */
import type { Log } from "../base/log.ts";
import { showJoinTokens, terminalOf } from "../mesh/join-token-file.ts";
import { decodeJoinToken } from "../mesh/join-token.ts";
import { guestToken } from "../mesh/roster-setup.ts";
import type { MeshNode } from "./mesh-node.ts";

export async function showFirstTokens(m: Pick<MeshNode, "founded" | "roster" | "token">, stateDir: string, log: Log): Promise<void> {
  if (!m.founded || !m.roster.held?.secret || !terminalOf()) return void showJoinTokens([{ label: "Join token", token: m.token }]);
  let guest: string | undefined;
  try {
    guest = await guestToken(stateDir, decodeJoinToken(m.token), "guest", undefined);
  } catch (err) {
    log.warn("could not make a first guest pass", { error: (err as Error).message });
  }
  showJoinTokens([
    { label: "Owner token (your own machines join with it: `mesh --join TOKEN`)", token: m.token },
    ...(guest ? [{ label: "Guest token (a pass for someone else's machine; `mesh guests revoke guest` takes it back)", token: guest }] : []),
  ]);
}
