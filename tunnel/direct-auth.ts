/**
 * The first bytes a host sends on a direct RPC connection (pure): its node id and an HMAC under
 * the mesh secret over both node ids and the worker's certificate hash. TLS already proved the
 * worker (pinned certificate) and hides the proof from eavesdroppers; binding the certificate hash
 * keeps a proof made for one worker from opening another.
 */
import { createHmac, timingSafeEqual } from "node:crypto";

const LABEL = "mesh/1 direct rpc";
const MAC_BYTES = 32;
const MAX_ID_BYTES = 256;

export function directMac(secret: Uint8Array, hostId: string, workerId: string, workerCertSha256: string): Uint8Array {
  const h = createHmac("sha256", secret);
  for (const part of [LABEL, hostId, workerId, workerCertSha256]) {
    const bytes = Buffer.from(part, "utf8");
    h.update(Buffer.from([bytes.length >> 8, bytes.length & 0xff]));
    h.update(bytes);
  }
  return Uint8Array.from(h.digest());
}

/** `u16be id length | host id | mac`. */
export function encodeDirectHello(hostId: string, mac: Uint8Array): Uint8Array {
  const id = Buffer.from(hostId, "utf8");
  const out = new Uint8Array(2 + id.length + MAC_BYTES);
  new DataView(out.buffer).setUint16(0, id.length);
  out.set(id, 2);
  out.set(mac, 2 + id.length);
  return out;
}

export type DirectHello = { hostId: string; mac: Uint8Array; rest: Uint8Array } | { need: number } | { error: string };

/** Parses the hello from the bytes received so far; `need` means wait for more. */
export function decodeDirectHello(bytes: Uint8Array): DirectHello {
  if (bytes.length < 2) return { need: 2 };
  const idLength = new DataView(bytes.buffer, bytes.byteOffset).getUint16(0);
  if (idLength === 0 || idLength > MAX_ID_BYTES) return { error: `host id of ${idLength} bytes` };
  const total = 2 + idLength + MAC_BYTES;
  if (bytes.length < total) return { need: total };
  return {
    hostId: Buffer.from(bytes.subarray(2, 2 + idLength)).toString("utf8"),
    mac: bytes.slice(2 + idLength, total),
    rest: bytes.subarray(total),
  };
}

export function verifyDirectMac(expected: Uint8Array, mac: Uint8Array): boolean {
  return mac.length === expected.length && timingSafeEqual(expected, mac);
}
