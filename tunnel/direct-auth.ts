/**
 * The first bytes a peer sends on a direct connection (pure): what it is for, its node id, an HMAC
 * under the mesh secret, and the node's Ed25519 signature, both over the purpose, both node ids and
 * the other end's certificate hash. TLS already proved the other end (pinned certificate) and
 * hides the proof from eavesdroppers; binding the certificate hash keeps a proof made for one node
 * from opening another, and binding the purpose keeps a proof for one use from being replayed for
 * another. The MAC proves the mesh secret; the signature proves the id is the sender's own (a node
 * id is its Ed25519 public key), so one member cannot speak, and be counted, as another.
 *
 * `0xfffe | u8 purpose | u16be id length | id | mac | signature`. Nodes before signatures sent
 * `u16be id length | id | mac` (RPC) or `0xffff | u8 purpose | ...`: refused, and such a node
 * keeps to the mesh connection.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import { SIGNATURE_BYTES } from "../mesh/transport.ts";

export type DirectPurpose = "rpc" | "model" | "kv";
const PURPOSE_CODES: Record<DirectPurpose, number> = { rpc: 0, model: 1, kv: 2 };
const SIGNED = 0xfffe;
const MAC_BYTES = 32;
const MAX_ID_BYTES = 256;

/** What the MAC and the signature are over. */
export function directStatement(hostId: string, workerId: string, workerCertSha256: string, purpose: DirectPurpose = "rpc"): Uint8Array {
  const parts: Buffer[] = [];
  for (const part of [`mesh/1 direct ${purpose}`, hostId, workerId, workerCertSha256]) {
    const bytes = Buffer.from(part, "utf8");
    parts.push(Buffer.from([bytes.length >> 8, bytes.length & 0xff]), bytes);
  }
  return Buffer.concat(parts);
}

export function directMac(secret: Uint8Array, hostId: string, workerId: string, workerCertSha256: string, purpose: DirectPurpose = "rpc"): Uint8Array {
  return Uint8Array.from(createHmac("sha256", secret).update(directStatement(hostId, workerId, workerCertSha256, purpose)).digest());
}

export function encodeDirectHello(hostId: string, mac: Uint8Array, signature: Uint8Array, purpose: DirectPurpose = "rpc"): Uint8Array {
  const id = Buffer.from(hostId, "utf8");
  const out = new Uint8Array(3 + 2 + id.length + MAC_BYTES + SIGNATURE_BYTES);
  const view = new DataView(out.buffer);
  view.setUint16(0, SIGNED);
  view.setUint8(2, PURPOSE_CODES[purpose]);
  view.setUint16(3, id.length);
  out.set(id, 5);
  out.set(mac, 5 + id.length);
  out.set(signature, 5 + id.length + MAC_BYTES);
  return out;
}

export type DirectHello = { purpose: DirectPurpose; hostId: string; mac: Uint8Array; signature: Uint8Array; rest: Uint8Array } | { need: number } | { error: string };

/** Parses the hello from the bytes received so far; `need` means wait for more. */
export function decodeDirectHello(bytes: Uint8Array): DirectHello {
  if (bytes.length < 2) return { need: 2 };
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (view.getUint16(0) !== SIGNED) return { error: "a hello without the member's signature (a node of an older version)" };
  if (bytes.length < 5) return { need: 5 };
  const code = view.getUint8(2);
  const purpose = (Object.keys(PURPOSE_CODES) as DirectPurpose[]).find((p) => PURPOSE_CODES[p] === code);
  if (!purpose) return { error: `unknown purpose ${code}` };
  const idLength = view.getUint16(3);
  if (idLength === 0 || idLength > MAX_ID_BYTES) return { error: `host id of ${idLength} bytes` };
  const macAt = 5 + idLength;
  const total = macAt + MAC_BYTES + SIGNATURE_BYTES;
  if (bytes.length < total) return { need: total };
  return {
    purpose,
    hostId: Buffer.from(bytes.subarray(5, macAt)).toString("utf8"),
    mac: bytes.slice(macAt, macAt + MAC_BYTES),
    signature: bytes.slice(macAt + MAC_BYTES, total),
    rest: bytes.subarray(total),
  };
}

export function verifyDirectMac(expected: Uint8Array, mac: Uint8Array): boolean {
  return mac.length === expected.length && timingSafeEqual(expected, mac);
}
