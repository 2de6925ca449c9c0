import { KV_FROM_HEADER } from "../../mesh/mesh-headers.ts";
/**
 * Where a conversation was answered last, so the server its next turn goes to can fetch its KV
 * cache from there (`kv/kv-follow.ts`) instead of reading the whole prompt again. The routing node
 * remembers, per model and affinity key, the server it last sent a long prompt to; when a turn goes
 * to another server, the request carries the one before (`x-mesh-kv-from` when it goes to a member).
 * Only long prompts are remembered: a short one is read again faster than any fetch. Bounded.
 */

/**
 * Bodies shorter than this never move a cache: the least that is fetched is two 64-token blocks,
 * and a token is a byte of text at the least, with the request's JSON around it. (The node that
 * serves the turn counts the prompt's tokens before it asks anyone.)
 */
export const KV_HINT_MIN_BODY = 256;
/** Conversations remembered; the least recently seen are forgotten first. */
const KEPT = 4096;

/** A node id as the mesh writes it (the hint from a member is used only as one). */
export const isNodeId = (text: string | null | undefined): text is string => typeof text === "string" && /^[0-9a-f]{64}$/.test(text);

export class LastServers {
  private readonly m = new Map<string, string>();

  /** Notes that `model`'s conversation `key` goes to `server` now; the server it went to before, when that was another. */
  moved(model: string, key: string, server: string): string | undefined {
    const k = `${model}\u0000${key}`;
    const before = this.m.get(k);
    this.m.delete(k);
    this.m.set(k, server);
    if (this.m.size > KEPT) this.m.delete(this.m.keys().next().value!);
    return before !== undefined && before !== server ? before : undefined;
  }
}
