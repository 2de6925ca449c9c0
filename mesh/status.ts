/**
 * What `GET /api/status` and `mesh status` show of the mesh: this node and its peers. Never the join
 * token: it carries the mesh secret, and `mesh token` reads it from the state dir instead.
 */
import type { Membership } from "./membership.ts";
import type { Role } from "./messages.ts";

export interface PeerStatus {
  nodeId: string;
  shortId: string;
  addresses: string[];
  rttMs: number;
  role: Role;
  serving: string[];
  /** Of those, the ones it serves as replicas beside their hosts (`mesh/replicas.ts`). */
  replicating?: string[];
  vramBytes: number;
  ramBytes: number;
  apiPort: number;
  meshVersion: string;
  llamaBuild: string;
  lastSeenMsAgo: number;
  /** Port of its direct RPC path (TLS), if it offers one. */
  directPort: number | undefined;
}

export interface MeshStatus {
  /** `starting` until the iroh endpoint is up. */
  state: "starting" | "running";
  nodeId: string | null;
  peers: PeerStatus[];
}

export const shortId = (id: string): string => id.slice(0, 10);

export function meshStatus(membership: Membership, now = Date.now()): MeshStatus {
  const peers = [...membership.peers.values()]
    .map((p): PeerStatus => ({
      nodeId: p.id,
      shortId: shortId(p.id),
      addresses: p.announcement.addresses,
      rttMs: p.conn.rttMs(),
      role: p.announcement.role,
      serving: p.announcement.serving,
      replicating: p.announcement.replicating,
      vramBytes: p.announcement.vramBytes,
      ramBytes: p.announcement.ramBytes,
      apiPort: p.announcement.apiPort,
      meshVersion: p.announcement.meshVersion,
      llamaBuild: p.announcement.llamaBuild,
      lastSeenMsAgo: now - p.lastSeen,
      directPort: p.announcement.direct?.port,
    }))
    .sort((a, b) => a.nodeId.localeCompare(b.nodeId));
  return { state: "running", nodeId: membership.selfId, peers };
}
