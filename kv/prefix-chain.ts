/**
 * A conversation's prompt as chained block hashes (pure): block i's hash covers its 64 tokens and
 * the hash before it, so equal hashes at i mean equal tokens from the first up to the end of block
 * i. A node asks the one that holds a conversation for it with its own prompt's chain, and the
 * holder gives only as many whole blocks as match: a member gets KV only of tokens it already had,
 * never the rest of someone else's conversation that shares an opening with it. The hashes are
 * never announced, only sent to the node asked.
 */

/** Tokens per block: what a cache is cut to, and what at most a match leaves to be read again. */
export const BLOCK_TOKENS = 64;
/** Hex characters of a block's hash kept (128 bits). */
const HASH_HEX = 32;
/** Blocks in one chain at most: 256k tokens, more than any context the mesh runs. */
export const MAX_BLOCKS = 4096;

/** The chain of `tokens`' whole blocks (a last partial block is not in it). */
export function chainOf(tokens: Int32Array, maxBlocks = MAX_BLOCKS): string[] {
  const out: string[] = [];
  const bytes = new Uint8Array(tokens.buffer, tokens.byteOffset, tokens.byteLength);
  let prev = "";
  for (let b = 0; b < Math.min(maxBlocks, Math.floor(tokens.length / BLOCK_TOKENS)); b++) {
    const hasher = new Bun.CryptoHasher("sha256");
    hasher.update(prev);
    hasher.update(bytes.subarray(b * BLOCK_TOKENS * 4, (b + 1) * BLOCK_TOKENS * 4));
    prev = hasher.digest("hex").slice(0, HASH_HEX);
    out.push(prev);
  }
  return out;
}

/** How many leading blocks two chains share. */
export function sharedBlocks(a: readonly string[], b: readonly string[]): number {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n++;
  return n;
}

/** Whether `text` is a chain's hash as `chainOf` writes it. */
export const isBlockHash = (text: string): boolean => text.length === HASH_HEX && /^[0-9a-f]+$/.test(text);
