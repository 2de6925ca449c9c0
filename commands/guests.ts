/**
 * `mesh guests`: the guest passes this mesh's roster issued (as this node knows them: issued here
 * or gossiped by the owner's other machines), each with its expiry, whether it was revoked, and the
 * nodes seen with it. `mesh guests revoke NAME` signs a revocation of every pass of that name; the
 * node gossips it and every node of the mesh drops those peers and refuses them from then on.
 */
import type { Config } from "../config/config.ts";
import { readRosterLog } from "../mesh/roster-files.ts";
import { ownerKeys, revokeGuest, RosterError } from "../mesh/roster-setup.ts";
import type { Pass } from "../mesh/roster.ts";
import { CommandError } from "./common.ts";
import { shortId } from "../base/short-id.ts";

export interface GuestRow {
  name: string;
  passId: string;
  expiresAt: number | null;
  state: "active" | "expired" | "revoked";
  nodes: string[];
}

/** The passes as rows (pure): issued ones, and ones only seen, newest name first by name. */
export function guestRows(log: ReturnType<typeof readRosterLog>, now: number): GuestRow[] {
  const revoked = new Set(log.statements.flatMap((s) => (s.kind === "revoke" ? [s.passId] : [])));
  const passes = new Map<string, Pick<Pass, "name" | "expiresAt">>();
  for (const s of log.statements) if (s.kind === "pass") passes.set(s.pass.id, s.pass);
  for (const [id, seen] of Object.entries(log.seen)) if (!passes.has(id)) passes.set(id, { name: seen.name, ...(seen.expiresAt !== undefined ? { expiresAt: seen.expiresAt } : {}) });
  return [...passes]
    .map(([id, p]) => ({
      name: p.name,
      passId: id,
      expiresAt: p.expiresAt ?? null,
      state: revoked.has(id) ? ("revoked" as const) : p.expiresAt !== undefined && p.expiresAt <= now ? ("expired" as const) : ("active" as const),
      nodes: log.seen[id]?.nodes ?? [],
    }))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : a.passId < b.passId ? -1 : 1));
}

export async function guestsCommand(config: Pick<Config, "stateDir">, revoke: string | undefined, json: boolean): Promise<void> {
  try {
    ownerKeys(config.stateDir, revoke ? "mesh guests revoke" : "mesh guests");
    if (revoke !== undefined) {
      const ids = await revokeGuest(config.stateDir, revoke);
      console.log(`revoked ${ids.length} pass${ids.length === 1 ? "" : "es"} named ${revoke}; the mesh's nodes drop its guests within seconds`);
      return;
    }
  } catch (err) {
    if (err instanceof RosterError) throw new CommandError(err.message);
    throw err;
  }
  const rows = guestRows(readRosterLog(config.stateDir), Date.now());
  if (json) return void console.log(JSON.stringify(rows, null, 2));
  if (rows.length === 0) return void console.log("no guest passes yet (`mesh token --guest --name NAME` makes one)");
  for (const r of rows) {
    const expires = r.expiresAt === null ? "no expiry" : `expires ${new Date(r.expiresAt).toISOString().slice(0, 16).replace("T", " ")} UTC`;
    console.log(`${r.name}  ${r.passId.slice(0, 8)}  ${r.state}  ${expires}  nodes ${r.nodes.map((n) => shortId(n)).join(",") || "none seen"}`);
  }
}
