/**
 * The roster: the owner's Ed25519 key that tells the owner's machines from guests, as signatures
 * any node checks for itself. A machine of the owner holds the roster's secret key and *vouches*
 * for itself: it signs its own node id. A guest holds a *pass* the roster signed (a name, an
 * expiry, an id and a key of the pass's own) and binds the pass to its node id with the pass's
 * key. Both bind the node id QUIC's TLS already proved, so a vouch or a pass copied from another
 * node proves nothing, and a pass's secret never leaves the guest's state dir. The roster also
 * signs statements the mesh gossips: a pass it issued, a pass it revoked, and that it is closed to
 * peers that show neither a vouch nor a pass.
 *
 * Every signed message starts with a label and the roster's public key, each part length-prefixed,
 * so no signature made for one purpose (or one roster) reads as another.
 */
import { randomBytes } from "node:crypto";
import { z } from "zod";
import { nodeIdOf, nodeSigner, signedBy } from "./transport-kit.ts";

export const HEX64 = /^[0-9a-f]{64}$/;
const HEX128 = /^[0-9a-f]{128}$/;
/** What a pass's name may be: shown on terminals and the console, so nothing that could drive them. */
export const GUEST_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export const PassSchema = z.object({
  /** Random, 16 bytes in hex: what a revocation names. */
  id: z.string().regex(/^[0-9a-f]{32}$/),
  name: z.string().regex(GUEST_NAME),
  /** ms since the epoch; none: it does not expire. */
  expiresAt: z.number().int().positive().optional(),
  /** The pass's own public key, which binds it to the node that shows it. */
  key: z.string().regex(HEX64),
  /** The roster's signature over the fields above. */
  sig: z.string().regex(HEX128),
});
export type Pass = z.infer<typeof PassSchema>;

/** What a node shows of its standing in its announcement: a vouch, or a pass and its binding. */
export const TrustClaimSchema = z.object({
  roster: z.string().regex(HEX64),
  vouch: z.string().regex(HEX128).optional(),
  pass: PassSchema.optional(),
  bind: z.string().regex(HEX128).optional(),
});
export type TrustClaim = z.infer<typeof TrustClaimSchema>;

export const StatementSchema = z.discriminatedUnion("kind", [
  /** A pass the roster issued (its secret stays with the guest): what `mesh guests` lists. */
  z.object({ kind: z.literal("pass"), pass: PassSchema }),
  z.object({ kind: z.literal("revoke"), passId: z.string().regex(/^[0-9a-f]{32}$/), at: z.number().int().positive(), sig: z.string().regex(HEX128) }),
  /** From `at` on, a peer that shows neither a vouch nor a pass is refused (a new mesh is closed from its start). */
  z.object({ kind: z.literal("closed"), at: z.number().int().positive(), sig: z.string().regex(HEX128) }),
]);
export type Statement = z.infer<typeof StatementSchema>;

const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");
const bytesOf = (h: string) => Uint8Array.from(Buffer.from(h, "hex"));

/** A label and parts, each with its length in front: one message can never be read as another. */
function message(label: string, roster: string, ...parts: string[]): Uint8Array {
  const chunks: Buffer[] = [];
  for (const part of [`mesh/roster ${label} v1`, roster, ...parts]) {
    const b = Buffer.from(part, "utf8");
    const len = Buffer.alloc(4);
    len.writeUInt32BE(b.length);
    chunks.push(len, b);
  }
  return Uint8Array.from(Buffer.concat(chunks));
}

const passMessage = (roster: string, p: Omit<Pass, "sig">) => message("pass", roster, p.id, p.name, String(p.expiresAt ?? 0), p.key);

export const newSecretKey = (): Uint8Array => Uint8Array.from(randomBytes(32));

/** The roster's (or a pass's) public key in hex, from its secret key. */
export const publicKeyOf = (secret: Uint8Array): string => nodeIdOf(secret);

/** The owner's machine `nodeId` vouched for by the roster's secret key. */
export function vouchFor(rosterSecret: Uint8Array, nodeId: string): string {
  return hex(nodeSigner(rosterSecret)(message("vouch", publicKeyOf(rosterSecret), nodeId)));
}

export function vouchHolds(roster: string, nodeId: string, vouch: string): boolean {
  return signedBy(roster, message("vouch", roster, nodeId), bytesOf(vouch));
}

/** A new pass, signed by the roster, and the pass's secret key (which goes only into the guest's token). */
export function issuePass(rosterSecret: Uint8Array, name: string, expiresAt: number | undefined): { pass: Pass; passSecret: Uint8Array } {
  if (!GUEST_NAME.test(name)) throw new Error(`a guest's name is letters, digits, '.', '_' and '-' (at most 64, starting with a letter or digit), not "${name}"`);
  const passSecret = newSecretKey();
  const fields = { id: randomBytes(16).toString("hex"), name, ...(expiresAt !== undefined ? { expiresAt } : {}), key: publicKeyOf(passSecret) };
  const sig = hex(nodeSigner(rosterSecret)(passMessage(publicKeyOf(rosterSecret), fields)));
  return { pass: { ...fields, sig }, passSecret };
}

export function passHolds(roster: string, pass: Pass): boolean {
  const { sig, ...fields } = pass;
  return signedBy(roster, passMessage(roster, fields), bytesOf(sig));
}

/** The guest's node `nodeId` bound to its pass, signed with the pass's secret key. */
export function bindPass(passSecret: Uint8Array, roster: string, passId: string, nodeId: string): string {
  return hex(nodeSigner(passSecret)(message("bind", roster, passId, nodeId)));
}

export function bindingHolds(roster: string, pass: Pass, nodeId: string, bind: string): boolean {
  return signedBy(pass.key, message("bind", roster, pass.id, nodeId), bytesOf(bind));
}

export function revokePass(rosterSecret: Uint8Array, passId: string, at: number): Extract<Statement, { kind: "revoke" }> {
  return { kind: "revoke", passId, at, sig: hex(nodeSigner(rosterSecret)(message("revoke", publicKeyOf(rosterSecret), passId, String(at)))) };
}

export function closeRoster(rosterSecret: Uint8Array, at: number): Extract<Statement, { kind: "closed" }> {
  return { kind: "closed", at, sig: hex(nodeSigner(rosterSecret)(message("closed", publicKeyOf(rosterSecret), String(at)))) };
}

/** Whether the roster signed the statement. */
export function statementHolds(roster: string, s: Statement): boolean {
  switch (s.kind) {
    case "pass":
      return passHolds(roster, s.pass);
    case "revoke":
      return signedBy(roster, message("revoke", roster, s.passId, String(s.at)), bytesOf(s.sig));
    case "closed":
      return signedBy(roster, message("closed", roster, String(s.at)), bytesOf(s.sig));
  }
}

/** One key per statement, to tell one already known without checking its signature again. */
export function statementKey(s: Statement): string {
  return s.kind === "pass" ? `pass:${s.pass.sig}` : `${s.kind}:${s.sig}`;
}

/** The claim this node shows: a vouch when it holds the roster's secret key, else its pass bound to its id. */
export function ownClaim(keys: RosterKeys, nodeId: string): TrustClaim {
  if (keys.secret) return { roster: keys.roster, vouch: vouchFor(keys.secret, nodeId) };
  if (keys.pass && keys.passSecret) return { roster: keys.roster, pass: keys.pass, bind: bindPass(keys.passSecret, keys.roster, keys.pass.id, nodeId) };
  return { roster: keys.roster };
}

/** What a node holds of the roster: its public key always; the secret on an owner's machine; a pass and its key on a guest's. */
export interface RosterKeys {
  roster: string;
  secret?: Uint8Array;
  pass?: Pass;
  passSecret?: Uint8Array;
}
