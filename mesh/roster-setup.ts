/**
 * Making and changing the roster in a state dir: a new mesh founds one (closed from its start), a
 * token brings one (the owner's key, or a guest's pass), `mesh roster init` makes one for a mesh
 * that had none (open: its older members stay, as guests), `mesh roster rotate` replaces a stolen
 * one, `mesh token --guest` issues a pass, `mesh guests revoke` revokes one. What the roster signs
 * goes into the log; a running node reads it within a heartbeat and gossips it.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { hasMeshSecret } from "./identity.ts";
import { encodeJoinToken, rosterOfToken, type JoinToken, type TokenRoster } from "./join-token.ts";
import { readRosterKeys, readRosterLog, ROSTER_FILE, updateRosterLog, withStatements, writeRosterKeys } from "./roster-files.ts";
import { closeRoster, issuePass, newSecretKey, publicKeyOf, revokePass, statementKey, type Pass, type RosterKeys, type Statement } from "./roster.ts";

/** What a failed roster verb tells the user. */
export class RosterError extends Error {}

/**
 * The keys a state dir holds after joining with a token's roster (pure); undefined keeps what it
 * holds. The token's roster wins (a mesh's rotated roster), and so does its pass, but an owner's
 * machine is never made a guest of its own roster by a guest's token (a service's MESH_JOIN given
 * again at each start, say).
 */
export function keysAfterJoin(held: RosterKeys | undefined, token: TokenRoster): RosterKeys | undefined {
  const roster = rosterOfToken(token);
  if (token.kind === "owner") return held?.roster === roster && held.secret ? undefined : { roster, secret: token.secret };
  if (held?.roster === roster && (held.secret || held.pass?.id === token.pass.id)) return undefined;
  return { roster, pass: token.pass, passSecret: token.passSecret };
}

/** Keeps a token's roster in the state dir (see `keysAfterJoin`). */
export function joinRoster(stateDir: string, token: TokenRoster): RosterKeys {
  const held = readRosterKeys(stateDir);
  const next = keysAfterJoin(held, token);
  if (next) writeRosterKeys(stateDir, next);
  return next ?? held!;
}

/** A new roster in the state dir, closed from its start when the mesh is new (`open`: an existing mesh's older members stay, as guests). */
export async function foundRoster(stateDir: string, open: boolean, now = Date.now()): Promise<RosterKeys> {
  const secret = newSecretKey();
  const keys = { roster: publicKeyOf(secret), secret };
  writeRosterKeys(stateDir, keys);
  await updateRosterLog(stateDir, () => ({ v: 1, statements: open ? [] : [closeRoster(secret, now)], seen: {} }));
  return keys;
}

/** The roster's secret key, held only on the owner's machines. */
export function ownerKeys(stateDir: string, verb: string): RosterKeys & { secret: Uint8Array } {
  const keys = readRosterKeys(stateDir);
  if (!keys) throw new RosterError(`${verb}: the node of ${stateDir} holds no roster (its mesh is unanchored: \`mesh roster init\` makes one)`);
  if (!keys.secret) throw new RosterError(`${verb}: the node of ${stateDir} is a guest of its mesh; only the owner's machines hold the roster's key`);
  return keys as RosterKeys & { secret: Uint8Array };
}

/** Signs `statements` into the log (each once). */
async function record(stateDir: string, statements: readonly Statement[]): Promise<void> {
  await updateRosterLog(stateDir, (log) => withStatements(log, statements, statementKey));
}

/** A new guest pass: kept in the log as issued, its secret key only in the token it goes into. */
export async function issueGuestPass(stateDir: string, name: string, expiresAt: number | undefined): Promise<{ roster: string; pass: Pass; passSecret: Uint8Array }> {
  const keys = ownerKeys(stateDir, "mesh token --guest");
  const { pass, passSecret } = issuePass(keys.secret, name, expiresAt);
  await record(stateDir, [{ kind: "pass", pass }]);
  return { roster: keys.roster, pass, passSecret };
}

/** A guest's token: where `base` reaches the mesh (its address, secret, line), and a new pass named `name`. */
export async function guestToken(stateDir: string, base: JoinToken, name: string, expiresAt: number | undefined): Promise<string> {
  const { roster, pass, passSecret } = await issueGuestPass(stateDir, name, expiresAt);
  return encodeJoinToken({ ...base, roster: { kind: "guest", roster, pass, passSecret } });
}

/** Revokes every pass named `name` that this node knows of (issued here or elsewhere, or seen); returns their ids. */
export async function revokeGuest(stateDir: string, name: string, now = Date.now()): Promise<string[]> {
  const keys = ownerKeys(stateDir, "mesh guests revoke");
  const log = readRosterLog(stateDir);
  const ids = new Set([...log.statements.flatMap((s) => (s.kind === "pass" && s.pass.name === name ? [s.pass.id] : [])), ...Object.entries(log.seen).flatMap(([id, s]) => (s.name === name ? [id] : []))]);
  const revoked = new Set(log.statements.flatMap((s) => (s.kind === "revoke" ? [s.passId] : [])));
  const fresh = [...ids].filter((id) => !revoked.has(id));
  if (ids.size === 0) throw new RosterError(`no guest pass named "${name}" is known here (\`mesh guests\` lists them)`);
  await record(stateDir, fresh.map((id) => revokePass(keys.secret, id, now)));
  return [...ids];
}

/** From now on, peers that show neither a vouch nor a pass are refused. */
export async function closeToPassless(stateDir: string, now = Date.now()): Promise<void> {
  const keys = ownerKeys(stateDir, "mesh roster close");
  await record(stateDir, [closeRoster(keys.secret, now)]);
}

/**
 * `mesh roster init`: a roster for a mesh that has none, made on one of its nodes. Its older
 * members stay, as guests, until the owner's machines join again with the owner's token.
 */
export async function initRoster(stateDir: string): Promise<RosterKeys> {
  if (existsSync(join(stateDir, ROSTER_FILE))) throw new RosterError(`${stateDir} already holds a roster (\`mesh roster rotate\` replaces it)`);
  if (!hasMeshSecret(stateDir)) throw new RosterError(`${stateDir} belongs to no mesh yet: start the node first (a new mesh makes its roster itself)`);
  return foundRoster(stateDir, true);
}

/** `mesh roster rotate`: a new roster key (a stolen machine held the old one); closed if the old one was. */
export async function rotateRoster(stateDir: string, now = Date.now()): Promise<RosterKeys> {
  ownerKeys(stateDir, "mesh roster rotate");
  const wasClosed = readRosterLog(stateDir).statements.some((s) => s.kind === "closed");
  return foundRoster(stateDir, !wasClosed, now);
}
