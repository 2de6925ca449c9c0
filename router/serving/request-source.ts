/**
 * Whose turn a request waits in when its model's slots are busy (pure): the member that forwarded
 * it (the mesh sets the forwarded marker to the sending node's id, and strips any marker a client
 * sends), else the API key it came with when that key is one of the node's `--api-key` values
 * (`acceptedKey`: checked by `requireApiKey`), else "local": an unchecked bearer value is a client's to invent,
 * and each would be a new turn. Sources only order the waiters of one
 * queue, whose bound caps them; a key is named by a hash, so the key itself is never kept.
 */
import { LLAMA_ROUTES } from "../http/route-table.ts";
import { FORWARDED_HEADER } from "../../mesh/mesh-headers.ts";

interface Headers {
  get(name: string): string | null;
}

export function requestSource(headers: Headers, acceptedKey: string | undefined): string {
  const from = headers.get(FORWARDED_HEADER);
  // "1": a member whose id the serving side did not pass on.
  if (from !== null) return from === "1" ? "member" : `member:${from.slice(0, 64)}`;
  if (acceptedKey) return `key:${new Bun.CryptoHasher("sha256").update(acceptedKey).digest("hex").slice(0, 16)}`;
  return "local";
}

/** llama-server paths that tokenize or count and run beside generation: they wait for no slot. */
const NO_SLOT = new Set([...Object.values(LLAMA_ROUTES), "/v1/messages/count_tokens"]);

/** Whether a request for llama-server's `upstreamPath` takes one of its slots (pure). */
export const takesSlot = (upstreamPath: string): boolean => !NO_SLOT.has(upstreamPath);
