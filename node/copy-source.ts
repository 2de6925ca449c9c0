/**
 * Whether a model a peer has is copied from that peer or downloaded afresh (pure). A copy over
 * the direct TLS path moves at the socket's speed; one over the mesh's QUIC connection (peers that
 * cannot reach each other directly) moves at what the iroh 1.x binding manages, ~15 MB/s, and
 * the hub a model came from is often several times faster. So a copy over the mesh connection of
 * a model this node could download itself (its hub alternative) is measured, the hub is tried
 * for a moment when its speed is not known, and the faster of the two goes on; the hub wins only
 * by a margin, so two sources of about one speed do not take turns.
 */
import type { StreamPath } from "./peer-streams.ts";

/** How much faster than the mesh connection the hub must be to be taken instead. */
export const HUB_MARGIN = 1.25;

export interface CopySituation {
  /** The path the peer copy's streams take. */
  path: StreamPath;
  /** Whether this node could download the model itself (`downloadPlan` says from where). */
  hasHub: boolean;
  /** Bytes per second measured over the mesh connection from that peer; undefined while not measured. */
  meshRate: number | undefined;
  /** Bytes per second measured from the hub; undefined while not measured. */
  hubRate: number | undefined;
}

/** Keep copying from the peer, stop it to measure the hub for a while, or stop it for the hub. */
export type CopySource = "peer" | "measure-hub" | "hub";

export function copySource(s: CopySituation): CopySource {
  if (s.path === "direct" || !s.hasHub) return "peer";
  // Nothing to compare yet: the copy goes on, measured.
  if (s.meshRate === undefined) return "peer";
  if (s.hubRate === undefined) return "measure-hub";
  return s.hubRate > s.meshRate * HUB_MARGIN ? "hub" : "peer";
}

/** A rate as a log line says it: "112 MB/s", "2.4 MB/s". */
export function formatRate(bytesPerSecond: number): string {
  const mb = bytesPerSecond / 1e6;
  return `${mb >= 10 ? Math.round(mb) : mb.toFixed(1)} MB/s`;
}
