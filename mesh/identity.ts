/**
 * This node's lasting secrets, kept in the state dir (dir 0700, files 0600): its Ed25519 secret key
 * (so its node id survives restarts) and the secret of the mesh it belongs to (32 random bytes made
 * when a mesh is founded, learned from a join token otherwise).
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { join } from "node:path";

export const SECRET_BYTES = 32;
const KEY_FILE = "node.key";
const MESH_SECRET_FILE = "mesh.secret";

function ensurePrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
}

function readHexSecret(path: string): Uint8Array | undefined {
  if (!existsSync(path)) return undefined;
  const hex = readFileSync(path, "utf8").trim();
  if (!/^[0-9a-f]{64}$/i.test(hex)) throw new Error(`${path} is not a 32-byte hex secret; remove it to make a new one`);
  return Uint8Array.from(Buffer.from(hex, "hex"));
}

function writeHexSecret(path: string, secret: Uint8Array): void {
  writeFileSync(path, `${Buffer.from(secret).toString("hex")}\n`, { mode: 0o600 });
  chmodSync(path, 0o600);
}

/** The node's secret key, made on first start. */
export function loadOrCreateNodeKey(stateDir: string): Uint8Array {
  ensurePrivateDir(stateDir);
  const path = join(stateDir, KEY_FILE);
  const existing = readHexSecret(path);
  if (existing) {
    chmodSync(path, 0o600);
    return existing;
  }
  const key = Uint8Array.from(randomBytes(SECRET_BYTES));
  writeHexSecret(path, key);
  return key;
}

/** Whether the state dir holds a mesh secret: the node belongs to a mesh already. */
export function hasMeshSecret(stateDir: string): boolean {
  return existsSync(join(stateDir, MESH_SECRET_FILE));
}

/** The mesh secret this state dir keeps, or undefined when it belongs to no mesh yet. */
export function readMeshSecret(stateDir: string): Uint8Array | undefined {
  return readHexSecret(join(stateDir, MESH_SECRET_FILE));
}

/**
 * The mesh secret: the one in a join token wins (and is kept for restarts), else the one kept from
 * before, else a new mesh is founded. `founded` says whether this start made a new one.
 */
export function resolveMeshSecret(stateDir: string, fromToken: Uint8Array | undefined): { secret: Uint8Array; founded: boolean } {
  ensurePrivateDir(stateDir);
  const path = join(stateDir, MESH_SECRET_FILE);
  if (fromToken) {
    writeHexSecret(path, fromToken);
    return { secret: fromToken, founded: false };
  }
  const kept = readHexSecret(path);
  if (kept) return { secret: kept, founded: false };
  const secret = Uint8Array.from(randomBytes(SECRET_BYTES));
  writeHexSecret(path, secret);
  return { secret, founded: true };
}
