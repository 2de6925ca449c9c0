/**
 * The first bytes a peer sends on a direct connection (pure): what it is for, its node id, and an
 * HMAC under the mesh secret over the purpose, both node ids and the other end's certificate hash.
 * TLS already proved the other end (pinned certificate) and hides the proof from eavesdroppers;
 * binding the certificate hash keeps a proof made for one node from opening another, and binding
 * the purpose keeps a proof for one use from being replayed for another.
 *
 * An RPC hello keeps the first layout (`u16be id length | id | mac`), which nodes before model
 * copies understand; any other purpose starts with 0xffff (never an id length) and its code.
 */
import { createHmac, timingSafeEqual } from "node:crypto";

export type DirectPurpose = "rpc" | "model";
const PURPOSE_CODES: Record<Exclude<DirectPurpose, "rpc">, number> = { model: 1 };
const TAGGED = 0xffff;
const MAC_BYTES = 32;
const MAX_ID_BYTES = 256;

export function directMac(secret: Uint8Array, hostId: string, workerId: string, workerCertSha256: string, purpose: DirectPurpose = "rpc"): Uint8Array {
  const h = createHmac("sha256", secret);
  for (const part of [`mesh/1 direct ${purpose}`, hostId, workerId, workerCertSha256]) {
    const bytes = Buffer.from(part, "utf8");
    h.update(Buffer.from([bytes.length >> 8, bytes.length & 0xff]));
    h.update(bytes);
  }
  return Uint8Array.from(h.digest());
}

/** `[0xffff | u8 purpose |] u16be id length | id | mac`. */
export function encodeDirectHello(hostId: string, mac: Uint8Array, purpose: DirectPurpose = "rpc"): Uint8Array {
  const id = Buffer.from(hostId, "utf8");
  const tag = purpose === "rpc" ? 0 : 3;
  const out = new Uint8Array(tag + 2 + id.length + MAC_BYTES);
  const view = new DataView(out.buffer);
  if (purpose !== "rpc") {
    view.setUint16(0, TAGGED);
    view.setUint8(2, PURPOSE_CODES[purpose]);
  }
  view.setUint16(tag, id.length);
  out.set(id, tag + 2);
  out.set(mac, tag + 2 + id.length);
  return out;
}

export type DirectHello = { purpose: DirectPurpose; hostId: string; mac: Uint8Array; rest: Uint8Array } | { need: number } | { error: string };

/** Parses the hello from the bytes received so far; `need` means wait for more. */
export function decodeDirectHello(bytes: Uint8Array): DirectHello {
  if (bytes.length < 2) return { need: 2 };
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let purpose: DirectPurpose = "rpc";
  let at = 0;
  if (view.getUint16(0) === TAGGED) {
    if (bytes.length < 5) return { need: 5 };
    const code = view.getUint8(2);
    const named = (Object.keys(PURPOSE_CODES) as (keyof typeof PURPOSE_CODES)[]).find((p) => PURPOSE_CODES[p] === code);
    if (!named) return { error: `unknown purpose ${code}` };
    purpose = named;
    at = 3;
  }
  const idLength = view.getUint16(at);
  if (idLength === 0 || idLength > MAX_ID_BYTES) return { error: `host id of ${idLength} bytes` };
  const total = at + 2 + idLength + MAC_BYTES;
  if (bytes.length < total) return { need: total };
  return {
    purpose,
    hostId: Buffer.from(bytes.subarray(at + 2, at + 2 + idLength)).toString("utf8"),
    mac: bytes.slice(at + 2 + idLength, total),
    rest: bytes.subarray(total),
  };
}

export function verifyDirectMac(expected: Uint8Array, mac: Uint8Array): boolean {
  return mac.length === expected.length && timingSafeEqual(expected, mac);
}
