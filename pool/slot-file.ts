/**
 * What the node reads of a slot file llama-server wrote (`POST /slots/N?action=save`), pure: the
 * sequence state file of llama.cpp, `u32 magic ('ggsq') | u32 version | u32 n_tokens | i32
 * tokens[n_tokens] | the KV state`. The node never reads the KV state; it names a file by a hash of
 * its token area (the conversation's prompt prefix as the model saw it, in the server's own
 * framing), so the same conversation saved twice is one file, and a file whose head is not such a
 * state (cut, or not llama.cpp's) is refused before anything is hashed or restored.
 */

/** 'ggsq' read as a little-endian u32 (llama.cpp's LLAMA_STATE_SEQ_MAGIC). */
export const SLOT_FILE_MAGIC = 0x67677371;
/** Bytes before the token area. */
export const SLOT_FILE_HEAD_BYTES = 12;
/** More tokens than any context llama.cpp runs: a count past it is not a state file's. */
export const MAX_SLOT_TOKENS = 1 << 24;

export type SlotFileHead = { tokens: number; version: number; tokenEnd: number } | { error: string };

/** The head of a slot file (its first 12 bytes at least) of `fileBytes` bytes in all. */
export function readSlotFileHead(head: Uint8Array, fileBytes: number): SlotFileHead {
  if (head.length < SLOT_FILE_HEAD_BYTES) return { error: `the file has ${head.length} bytes, fewer than a slot file's head` };
  const view = new DataView(head.buffer, head.byteOffset, head.byteLength);
  if (view.getUint32(0, true) !== SLOT_FILE_MAGIC) return { error: "not a llama.cpp sequence state (wrong magic)" };
  const version = view.getUint32(4, true);
  const tokens = view.getUint32(8, true);
  if (tokens === 0) return { error: "the slot file holds no tokens" };
  if (tokens > MAX_SLOT_TOKENS) return { error: `the slot file claims ${tokens} tokens, more than any context` };
  const tokenEnd = SLOT_FILE_HEAD_BYTES + tokens * 4;
  // The KV state follows the tokens: a file that ends inside them is cut.
  if (tokenEnd >= fileBytes) return { error: `the slot file ends before its ${tokens} tokens do` };
  return { tokens, version, tokenEnd };
}

/** The name a slot file is kept under: the SHA-256 of its token area, hex (64 characters), `.bin`. */
export const slotFileName = (tokenHash: string): string => `${tokenHash}.bin`;

/** Whether `name` is one the node gave a slot file (anything else in its folders is not read). */
export const isSlotFileName = (name: string): boolean => /^[0-9a-f]{64}\.bin$/.test(name);
