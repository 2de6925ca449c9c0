/**
 * Which label values the node's metrics use (pure). Every label is bounded: routes are the API's
 * own paths, a model is one the node knows (a request for any other counts as "unknown"), peers
 * are short node ids, statuses are HTTP status codes.
 */
import type { PeerTunnelCounters } from "../tunnel/tunnels.ts";
import { shortId } from "../base/short-id.ts";

/** Request durations: 5 ms (a cached answer, an error) to 2 min (a long generation on a slow node). */
export const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120];

/** Waits for a slot: none (a free one), a short wait behind a few tokens, up to minutes behind long generations. */
export const QUEUE_WAIT_BUCKETS = [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

/** The inference paths (`/v1`, llama-server's root ones, Ollama's) and the model list labelled as themselves; anything else is "other". */
export function routeLabel(path: string, inferencePaths: ReadonlySet<string>): string {
  if (inferencePaths.has(path) || path === "/v1/models") return path;
  if (path.startsWith("/v1/models/")) return "/v1/models/{id}";
  return "other";
}

/**
 * The model a request is counted under: "" when it named none (or its body was not JSON), "unknown"
 * when the node answered 404 (any name a client sends would otherwise become a series of its own).
 */
export function modelLabel(model: string | undefined, status: number): string {
  if (model === undefined) return "";
  return status === 404 ? "unknown" : model;
}

/** A peer as the metrics name it: the short id `mesh status` shows. */
export const peerLabel = (nodeId: string): string => shortId(nodeId);

/** Bytes a peer's tunnels carried each way, host and worker side together. */
export function tunnelBytes(c: PeerTunnelCounters): { in: number; out: number } {
  return { in: c.fromPeer.bytes + c.fromPeerHost.bytes, out: c.toPeer.bytes + c.toPeerHost.bytes };
}
