/**
 * How the CLI knows the process answering on the configured port is the node of its own state dir
 * before it sends that node the API key. Another local user may have taken the port first (a node
 * that was down, a port given up): the key must never go to it. The node keeps a fresh random key
 * in a 0600 file of its state dir; the CLI (run by the state dir's owner) reads it, sends a random
 * challenge, and checks the node's HMAC of it, bound to the port the node listens on (so a squatter
 * cannot pass the challenge on to a node listening elsewhere). The key file never leaves the state
 * dir, and the proof says nothing of it or of the API keys.
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { writePrivateFile } from "../private-file.ts";

export const LOCAL_PROOF_FILE = "local-api.key";
/** Where the node answers a challenge: outside `/api`, since the CLI sends no key before the proof. */
export const LOCAL_PROOF_PATH = "/local-node-proof";
const CHALLENGE = /^[0-9a-f]{64}$/;

export const newChallenge = (): string => randomBytes(32).toString("hex");

/** Undefined when `challenge` is not one the CLI makes (64 hex digits). */
export function proofOf(key: string, challenge: string, port: number): string | undefined {
  if (!CHALLENGE.test(challenge)) return undefined;
  return createHmac("sha256", key).update(`mesh local node proof\0${port}\0${challenge}`).digest("hex");
}

export function proofHolds(key: string, challenge: string, port: number, proof: string): boolean {
  const expected = proofOf(key, challenge, port);
  if (expected === undefined || proof.length !== expected.length) return false;
  return timingSafeEqual(Buffer.from(proof), Buffer.from(expected));
}

/** The node's side: a fresh key in its state dir for as long as it runs. */
export class LocalProofKey {
  readonly file: string;
  private readonly key = randomBytes(32).toString("hex");

  constructor(stateDir: string) {
    this.file = join(stateDir, LOCAL_PROOF_FILE);
    writePrivateFile(this.file, `${this.key}\n`);
  }

  prove(challenge: string, port: number): string | undefined {
    return proofOf(this.key, challenge, port);
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
