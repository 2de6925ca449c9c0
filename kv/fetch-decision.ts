/**
 * Whether a conversation's KV is fetched from the node that holds it or read again here (pure):
 * fetched when moving its bytes and restoring them is expected to take well under reading its
 * tokens, by rates this node measured itself: its own prompt reading for the model (else a fast
 * reading assumed, so only a clear win is fetched; the holder's word on it counts for nothing),
 * the link to the holder as earlier fetches found it (else a cautious guess), and restoring. The
 * fetch gets a deadline of what reading would have cost, so a fetch that goes wrong costs at most
 * that, never more.
 */

/** Fetched only when expected to take at most this share of reading. */
export const FETCH_MARGIN = 0.8;
/** A link never measured: a guess well under a LAN's, so only a clear win is fetched. */
export const UNMEASURED_LINK_BPS = 40 * 2 ** 20;
/** Restoring never measured (llama-server reads a state at disk speed; measured ~2.5 GB/s here). */
export const UNMEASURED_RESTORE_BPS = 500 * 2 ** 20;
/**
 * Prompt reading never measured here (after a start): assumed fast, so the fetch must win clearly
 * (a GPU reads thousands of tokens a second; this 2-core box reads `wide` at ~800).
 */
export const UNMEASURED_PREFILL_TPS = 4_000;
/** Besides the bytes: the answer to the offer, a file written, a restore called. */
export const FETCH_OVERHEAD_MS = 15;
/** The least a fetch is given, whatever the estimate (a stream's first bytes). */
export const MIN_DEADLINE_MS = 250;

export interface FetchCase {
  /** Tokens the holder offers, and the bytes of its file. */
  tokens: number;
  bytes: number;
  /** Prompt tokens per second: this node's for the model, measured (the holder's claim is never read). */
  ownPrefillTps: number | undefined;
  /** Bytes per second from that holder, measured by earlier fetches. */
  linkBps: number | undefined;
  restoreBps: number | undefined;
}

export type FetchVerdict =
  | { fetch: true; prefillMs: number; fetchMs: number; deadlineMs: number }
  | { fetch: false; why: string; prefillMs: number; fetchMs: number };

export function fetchOrPrefill(c: FetchCase): FetchVerdict {
  const fetchMs = (c.bytes / (c.linkBps ?? UNMEASURED_LINK_BPS) + c.bytes / (c.restoreBps ?? UNMEASURED_RESTORE_BPS)) * 1000 + FETCH_OVERHEAD_MS;
  const tps = c.ownPrefillTps !== undefined && c.ownPrefillTps > 0 ? c.ownPrefillTps : UNMEASURED_PREFILL_TPS;
  const prefillMs = (c.tokens / tps) * 1000;
  if (fetchMs > prefillMs * FETCH_MARGIN) return { fetch: false, why: `reading ${c.tokens} tokens (~${Math.round(prefillMs)} ms) is about as fast as fetching ${c.bytes} bytes (~${Math.round(fetchMs)} ms)`, prefillMs, fetchMs };
  return { fetch: true, prefillMs, fetchMs, deadlineMs: Math.max(MIN_DEADLINE_MS, prefillMs) };
}
