/**
 * How the CLI knows the process answering on the configured address is the node of its own state
 * dir before it sends that node the API key. Another local user may have taken the port first (a
 * node that was down, a port given up), or hold the same port on another address (the node on
 * 127.0.0.2, a squatter on 127.0.0.1; IPv4 and IPv6 alike): the key must never go to it. The node
 * keeps a fresh random key in a 0600 file of its state dir; the CLI (run by the state dir's owner)
 * reads it, dials a concrete address (a name is resolved first), sends a random challenge and the
 * address it dialed, and checks the node's HMAC of them, bound to the address the node listens on,
 * which must be where the CLI dialed. A squatter that passes the challenge on to the real node gets
 * a proof for an address that is not the one the CLI dialed. The key file never leaves the state
 * dir, and the proof says nothing of it or of the API keys.
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { lookup } from "node:dns/promises";
import { readFileSync, rmSync } from "node:fs";
import { isIP } from "node:net";
import { join } from "node:path";
import { writePrivateFile } from "../base/private-file.ts";

export const LOCAL_PROOF_FILE = "local-api.key";
/** Where the node answers a challenge: outside `/api`, since the CLI sends no key before the proof. */
export const LOCAL_PROOF_PATH = "/local-node-proof";
const CHALLENGE = /^[0-9a-f]{64}$/;

export const newChallenge = (): string => randomBytes(32).toString("hex");

/** A socket address as both sides write it: an IP literal (IPv6 in brackets) and a port. */
export interface SocketAddress {
  host: string;
  port: number;
}

export const socketText = (a: SocketAddress): string => `${a.host.includes(":") ? `[${a.host}]` : a.host}:${a.port}`;

/** `HOST:PORT` or `[V6]:PORT` with an IP literal, or undefined. */
export function parseSocket(text: string | undefined): SocketAddress | undefined {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([0-9.]+)):(\d{1,5})$/.exec(text ?? "");
  const host = (m?.[1] ?? m?.[2])?.toLowerCase();
  const port = Number(m?.[3]);
  if (!host || !isIP(host) || !(port > 0 && port < 65536)) return undefined;
  return { host, port };
}

/**
 * Whether a node listening on `bound` answers at `dialed` (pure): the same port, and the same
 * address, or a wildcard of its family (`0.0.0.0` IPv4 only, `::` both, as Bun binds it).
 */
export function covers(bound: SocketAddress, dialed: SocketAddress): boolean {
  if (bound.port !== dialed.port) return false;
  if (bound.host === dialed.host || bound.host === "::") return true;
  return bound.host === "0.0.0.0" && isIP(dialed.host) === 4;
}

/** The HMAC of a challenge for `dialed`, by the node listening on `bound`; undefined for a challenge the CLI does not make. */
export function proofOf(key: string, challenge: string, bound: SocketAddress, dialed: SocketAddress): string | undefined {
  if (!CHALLENGE.test(challenge)) return undefined;
  return createHmac("sha256", key).update(`mesh local node proof v2\0${socketText(bound)}\0${socketText(dialed)}\0${challenge}`).digest("hex");
}

/** The CLI's check: the proof is the key's, for the address it dialed, by a node whose bound address is where it dialed. */
export function proofHolds(key: string, challenge: string, bound: SocketAddress, dialed: SocketAddress, proof: string): boolean {
  const expected = proofOf(key, challenge, bound, dialed);
  if (expected === undefined || !covers(bound, dialed) || proof.length !== expected.length) return false;
  return timingSafeEqual(Buffer.from(proof), Buffer.from(expected));
}

/** The address a listen host binds or is dialed at: a wildcard or IP as it is, a name by its first address (as Bun binds it). */
export async function concreteHost(host: string): Promise<string> {
  const bare = host.replace(/^\[|\]$/g, "").toLowerCase();
  return isIP(bare) ? bare : (await lookup(bare)).address.toLowerCase();
}

/** The node's side: a fresh key in its state dir for as long as it runs. */
export class LocalProofKey {
  readonly file: string;
  private readonly key = randomBytes(32).toString("hex");

  constructor(
    stateDir: string,
    /** Where the API listens, as bound (an IP or a wildcard). */
    private readonly bound: SocketAddress,
  ) {
    this.file = join(stateDir, LOCAL_PROOF_FILE);
    writePrivateFile(this.file, `${this.key}\n`);
  }

  /** The proof for a challenge and the address the CLI dialed, and where this node listens; none when it does not listen there. */
  prove(challenge: string, dialedText: string): { proof: string; bound: string } | undefined {
    const dialed = parseSocket(dialedText);
    if (!dialed || !covers(this.bound, dialed)) return undefined;
    const proof = proofOf(this.key, challenge, this.bound, dialed);
    return proof === undefined ? undefined : { proof, bound: socketText(this.bound) };
  }

  remove(): void {
    rmSync(this.file, { force: true });
  }
}

/** The CLI's side: the key of the node of `stateDir`, if one runs from it (the file is there and readable). */
export function readProofKey(stateDir: string): string | undefined {
  try {
    return readFileSync(join(stateDir, LOCAL_PROOF_FILE), "utf8").trim() || undefined;
  } catch {
    return undefined;
  }
}
