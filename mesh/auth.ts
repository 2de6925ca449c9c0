/**
 * Proof that both ends of a new connection hold the mesh secret, without sending it: each side
 * sends a fresh nonce, then an HMAC-SHA256 under the secret over its role, both node ids (which
 * QUIC's TLS already authenticated) and both nonces. Binding the ids stops a proof from being
 * replayed on another connection; binding the role stops it from being reflected back.
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

export const NONCE_BYTES = 32;
export const MAC_BYTES = 32;
const LABEL = "mesh/1 auth";

export type AuthRole = "dialer" | "acceptor";

export interface AuthContext {
  secret: Uint8Array;
  dialerId: string;
  acceptorId: string;
  dialerNonce: Uint8Array;
  acceptorNonce: Uint8Array;
}

export function authMac(role: AuthRole, ctx: AuthContext): Uint8Array {
  const h = createHmac("sha256", ctx.secret);
  for (const part of [LABEL, role, ctx.dialerId, ctx.acceptorId]) {
    const bytes = Buffer.from(part, "utf8");
    h.update(Buffer.from([bytes.length >> 8, bytes.length & 0xff]));
    h.update(bytes);
  }
  h.update(ctx.dialerNonce);
  h.update(ctx.acceptorNonce);
  return Uint8Array.from(h.digest());
}

export function verifyMac(role: AuthRole, ctx: AuthContext, mac: Uint8Array): boolean {
  const expected = authMac(role, ctx);
  return mac.length === expected.length && timingSafeEqual(expected, mac);
}

export const newNonce = (): Uint8Array => Uint8Array.from(randomBytes(NONCE_BYTES));
