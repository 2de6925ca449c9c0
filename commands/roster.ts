/**
 * `mesh roster`: the key that tells the owner's machines from guests, in the state dir. `init`
 * makes one for a mesh that has none (its older members count as guests until the owner's
 * machines join again with the owner's token), `join TOKEN` takes the owner's token on a machine of
 * the same mesh without leaving it, `rotate` replaces the key when a machine that held it is lost
 * (the owner's machines join again; guests need new passes), `close` refuses peers that show
 * neither a vouch nor a pass. A running node reads the change within a heartbeat.
 */
import type { Config } from "../config/config.ts";
import { readMeshSecret } from "../mesh/identity.ts";
import { decodeJoinToken, encodeJoinToken, JoinTokenError } from "../mesh/join-token.ts";
import { closeToPassless, initRoster, joinRoster, RosterError, rotateRoster } from "../mesh/roster-setup.ts";
import type { RosterKeys } from "../mesh/roster.ts";
import { CommandError } from "./common.ts";
import { keptToken } from "./token.ts";

type Action = "init" | "join" | "rotate" | "close";

/** The owner's token for `keys`, where this node's kept token reaches the mesh. */
function ownerToken(stateDir: string, keys: RosterKeys): string {
  return encodeJoinToken({ ...keptToken(stateDir).token, roster: { kind: "owner", secret: keys.secret! } });
}

export async function rosterCommand(config: Pick<Config, "stateDir">, action: Action, tokenText?: string): Promise<void> {
  const dir = config.stateDir;
  try {
    switch (action) {
      case "init": {
        const keys = await initRoster(dir);
        console.log(`This mesh has a roster now; peers without a vouch count as guests.\nOwner token (join your other machines with \`mesh roster join TOKEN\`, or start them with --join TOKEN):\n${ownerToken(dir, keys)}`);
        return;
      }
      case "join": {
        let token;
        try {
          token = decodeJoinToken(tokenText!);
        } catch (err) {
          if (err instanceof JoinTokenError) throw new CommandError(err.message);
          throw err;
        }
        if (!token.roster) throw new CommandError("that token carries no roster: ask the mesh's owner for theirs (`mesh token` on one of their machines)");
        const secret = readMeshSecret(dir);
        if (secret === undefined) throw new CommandError(`${dir} belongs to no mesh: start the node with --join TOKEN instead`);
        if (!Buffer.from(secret).equals(Buffer.from(token.secret))) throw new CommandError("that token is of another mesh: start the node with --join TOKEN to move it there");
        const keys = joinRoster(dir, token.roster);
        console.log(keys.secret ? "This machine is one of the owner's now (a running node shows it within seconds)." : `This machine is a guest (${keys.pass?.name ?? "no pass"}) of the mesh's roster.`);
        return;
      }
      case "rotate": {
        const keys = await rotateRoster(dir);
        console.log(`A new roster key: every machine that held the old one is refused until it joins again, and every guest pass is void.\nOwner token (\`mesh roster join TOKEN\` on each of your machines):\n${ownerToken(dir, keys)}`);
        return;
      }
      case "close":
        await closeToPassless(dir);
        console.log("Peers that show neither a vouch nor a guest pass are refused from now on (the mesh's nodes drop them within seconds).");
        return;
    }
  } catch (err) {
    if (err instanceof RosterError) throw new CommandError(err.message);
    throw err;
  }
}
