/**
 * A model's content identity: one SHA-256 over the files a copy of it consists of (their names as
 * they arrive on a peer, sizes and SHA-256s), so the name a member announces stands for bytes every
 * node can check. The node that seeded the model (from a file or a hub) announces it first; a copy
 * is taken only from a holder announcing the identity the mesh agrees on, and its files are checked
 * against that identity before a byte is written (`models/peer-transfer.ts`). A node works out its
 * own models' identities with `ModelIdentities` (`models/model-identities.ts`).
 */
export interface IdentityFile {
  name: string;
  size: number;
  sha256: string;
}

/** The identity of a model made of `files` (pure; the order they are listed in does not matter). */
export function contentIdentity(files: readonly IdentityFile[]): string {
  const lines = files.map((f) => `${f.name}\t${f.size}\t${f.sha256}\n`).sort();
  return new Bun.CryptoHasher("sha256").update(lines.join("")).digest("hex");
}
