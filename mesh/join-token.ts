/**
 * Join tokens: URL-safe text carrying one member's address (node id, direct addresses, relay URL
 * if any) and the mesh secret, so a token is a credential: whoever holds it can join. A mesh with a
 * roster (`roster.ts`) has two kinds: the owner's token also carries the roster's secret key (the
 * machine that joins with it is one of the owner's), a guest's carries the roster's public key and
 * a pass the roster signed, with the pass's own key. Tokens of meshes without a roster carry
 * neither, and nodes before rosters read any token as one of those.
 */
import { z } from "zod";
import { SECRET_BYTES } from "./identity.ts";
import { HEX64, PassSchema, publicKeyOf, type Pass } from "./roster.ts";
import { LEGACY_LINE, TRANSPORT_LINES, type MemberAddr, type TransportLine } from "./transport-kit.ts";

const PREFIX = "mesh1";

export type { MemberAddr } from "./transport-kit.ts";

export interface JoinToken {
  addr: MemberAddr;
  secret: Uint8Array;
  /** The iroh line its mesh runs; absent in tokens of iroh035 meshes (and of nodes before iroh1). */
  line?: TransportLine;
  /** The mesh's own relays (`--relay URL`), which a joiner uses unless told otherwise. */
  relays?: string[];
  /** What the joiner holds of the mesh's roster: its secret key (an owner's machine), or a guest's pass. */
  roster?: TokenRoster;
}

export type TokenRoster = { kind: "owner"; secret: Uint8Array } | { kind: "guest"; roster: string; pass: Pass; passSecret: Uint8Array };

/** What a text is not a join token for; the message says what to paste instead. */
export class JoinTokenError extends Error {}

// Limits as a member's address has them (MemberAddrSchema), so whatever a token carries the mesh accepts.
const Wire = z.object({
  n: z.string().min(1).max(128),
  a: z.array(z.string().max(64)).max(32),
  r: z.string().url().max(256).optional(),
  s: z.string(),
  t: z.enum(TRANSPORT_LINES).optional(),
  rs: z
    .array(z.string().url().max(256).refine((u) => /^https?:\/\//.test(u), "a relay URL is http or https"))
    .min(1)
    .max(8)
    .optional(),
  /** The roster's secret key: an owner's token. */
  k: z.string().optional(),
  /** A guest's: the roster's public key, the pass, the pass's secret key. */
  g: z.object({ r: z.string().regex(HEX64), p: PassSchema, s: z.string() }).optional(),
});

export function encodeJoinToken(t: JoinToken): string {
  const wire: z.infer<typeof Wire> = { n: t.addr.nodeId, a: t.addr.addresses, s: Buffer.from(t.secret).toString("base64url") };
  if (t.addr.relayUrl) wire.r = t.addr.relayUrl;
  if (t.line && t.line !== LEGACY_LINE) wire.t = t.line;
  if (t.relays?.length) wire.rs = t.relays;
  if (t.roster?.kind === "owner") wire.k = Buffer.from(t.roster.secret).toString("base64url");
  if (t.roster?.kind === "guest") wire.g = { r: t.roster.roster, p: t.roster.pass, s: Buffer.from(t.roster.passSecret).toString("base64url") };
  return PREFIX + Buffer.from(JSON.stringify(wire)).toString("base64url");
}

export function decodeJoinToken(text: string): JoinToken {
  const bad = (why: string) => new JoinTokenError(`not a mesh join token (${why}); copy the whole token that \`mesh token\` prints on a member`);
  const trimmed = text.trim();
  if (!trimmed.startsWith(PREFIX)) throw bad(`it should start with "${PREFIX}"`);
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(trimmed.slice(PREFIX.length), "base64url").toString("utf8"));
  } catch {
    throw bad("it does not decode");
  }
  const parsed = Wire.safeParse(json);
  if (!parsed.success) throw bad("its fields are wrong");
  const secret = Uint8Array.from(Buffer.from(parsed.data.s, "base64url"));
  if (secret.length !== SECRET_BYTES) throw bad("its secret has the wrong length");
  if (parsed.data.a.length === 0 && !parsed.data.r) throw bad("it carries no address to dial");
  // Only the 1.x line can be given relays: such a token from anywhere else is not one a node made.
  if (parsed.data.rs && parsed.data.t !== "iroh1") throw bad("its relays are for a mesh on iroh1, which it does not name");
  const roster = rosterOf(parsed.data, bad);
  return {
    addr: { nodeId: parsed.data.n, addresses: parsed.data.a, ...(parsed.data.r ? { relayUrl: parsed.data.r } : {}) },
    secret,
    ...(parsed.data.t && parsed.data.t !== LEGACY_LINE ? { line: parsed.data.t } : {}),
    ...(parsed.data.rs ? { relays: parsed.data.rs } : {}),
    ...(roster ? { roster } : {}),
  };
}

function rosterOf(w: z.infer<typeof Wire>, bad: (why: string) => JoinTokenError): TokenRoster | undefined {
  if (w.k !== undefined && w.g !== undefined) throw bad("it is both an owner's and a guest's");
  const key = (text: string, what: string) => {
    const k = Uint8Array.from(Buffer.from(text, "base64url"));
    if (k.length !== 32) throw bad(`its ${what} has the wrong length`);
    return k;
  };
  if (w.k !== undefined) return { kind: "owner", secret: key(w.k, "roster key") };
  if (w.g === undefined) return undefined;
  const passSecret = key(w.g.s, "pass key");
  if (publicKeyOf(passSecret) !== w.g.p.key) throw bad("its pass key is not the pass's");
  return { kind: "guest", roster: w.g.r, pass: w.g.p, passSecret };
}

/** The roster's public key a token's roster names. */
export const rosterOfToken = (r: TokenRoster): string => (r.kind === "owner" ? publicKeyOf(r.secret) : r.roster);
