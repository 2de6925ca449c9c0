/**
 * The HTTP headers nodes put on requests and answers they pass each other (`http-stream.ts` carries
 * them over a member's stream). Every one is named here, beside the forwarding code, so what crosses
 * between nodes is read in one place. A client from outside never sets one that counts: the router
 * reads the request-side ones only on a request a member forwarded (`router/serving/request-source.ts`).
 */

/** Marks a request that already crossed the mesh (the value: the sending member's id): it is answered where it lands, never forwarded again. */
export const FORWARDED_HEADER = "x-mesh-forwarded";

/** Names the node that answered a request, in its response (forwarded responses keep it). */
export const ANSWERED_BY_HEADER = "x-mesh-node";

/** On an answer that came from a second server: the node that failed the request first. */
export const RETRIED_FROM_HEADER = "x-mesh-retried-from";

/** On a request a member forwards: the node that answered this conversation's turn before (`kv/`). */
export const KV_FROM_HEADER = "x-mesh-kv-from";

/** On a request a member forwards: its client's Ollama `keep_alive`, in whole milliseconds (`router/serving/keep-alive.ts`). */
export const KEEP_ALIVE_HEADER = "x-mesh-keep-alive";
