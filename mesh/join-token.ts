/**
 * Join tokens: URL-safe text carrying one member's address (node id, direct addresses, relay URL
 * if any) and the mesh secret. Any member's token admits a node to the whole mesh, so a token is a
 * credential: whoever holds it can join.
 */
import { z } from "zod";
import { SECRET_BYTES } from "./identity.ts";
import { LEGACY_LINE, TRANSPORT_LINES, type MemberAddr, type TransportLine } from "./transport.ts";

const PREFIX = "mesh1";

export type { MemberAddr } from "./transport.ts";

export interface JoinToken {
  addr: MemberAddr;
  secret: Uint8Array;
  /** The iroh line its mesh runs; absent in tokens of iroh035 meshes (and of nodes before iroh1). */
  line?: TransportLine;
  /** The mesh's own relays (`--relay URL`), which a joiner uses unless told otherwise. */
  relays?: string[];
}

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
});

export function encodeJoinToken(t: JoinToken): string {
  const wire: z.infer<typeof Wire> = { n: t.addr.nodeId, a: t.addr.addresses, s: Buffer.from(t.secret).toString("base64url") };
  if (t.addr.relayUrl) wire.r = t.addr.relayUrl;
  if (t.line && t.line !== LEGACY_LINE) wire.t = t.line;
  if (t.relays?.length) wire.rs = t.relays;
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
  return {
    addr: { nodeId: parsed.data.n, addresses: parsed.data.a, ...(parsed.data.r ? { relayUrl: parsed.data.r } : {}) },
    secret,
    ...(parsed.data.t && parsed.data.t !== LEGACY_LINE ? { line: parsed.data.t } : {}),
    ...(parsed.data.rs ? { relays: parsed.data.rs } : {}),
  };
}
