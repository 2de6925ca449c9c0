/**
 * The key this node's `llama-server` children answer to. They listen on loopback, where a web page
 * (its fetches to 127.0.0.1 carry any Origin llama.cpp's open CORS allows) or another local user
 * could otherwise run inference and read the model's path around the node's own API and its checks.
 * A fresh key at every start, in a 0600 file of the state dir that each child reads
 * (`--api-key-file`: the key never appears in a process's arguments, which every user can read).
 */
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { writePrivateFile } from "../base/private-file.ts";

export interface ChildKey {
  file: string;
  /** What the node sends with every request to a child. */
  headers: Readonly<Record<string, string>>;
}

export const CHILD_KEY_FILE = "llama-server.key";

export function newChildKey(stateDir: string): ChildKey {
  const key = randomBytes(32).toString("base64url");
  const file = join(stateDir, CHILD_KEY_FILE);
  writePrivateFile(file, `${key}\n`);
  return { file, headers: { authorization: `Bearer ${key}` } };
}
