/**
 * What `GET /api/status` and `mesh status` show of the mesh: this node and its peers. Never the join
 * token: it carries the mesh secret, and `mesh token` reads it from the state dir instead.
 */
import { shortId } from "../base/short-id.ts";
import type { ControlCounters } from "./control-sender.ts";
import type { Membership } from "./membership.ts";
import type { Refusal } from "./peer-standings.ts";
import type { OwnTrust } from "./roster-state.ts";
import type { Role } from "./messages.ts";
import { LEGACY_LINE, type RelaySetting, type TransportLine } from "./transport.ts";

export interface PeerStatus {
  nodeId: string;
  shortId: string;
  addresses: string[];
  rttMs: number;
  role: Role;
  serving: string[];
  /** Of those, the ones it serves as replicas beside their hosts (`placement/replicas.ts`). */
  replicating?: string[];
  vramBytes: number;
  ramBytes: number;
  apiPort: number;
  meshVersion: string;
  llamaBuild: string;
  lastSeenMsAgo: number;
  /** This node watches it (`watch-ring.ts`): beats it and drops it at the short limits; the others it judges by QUIC's keep-alives. */
  watched: boolean;
  /** Port of its direct RPC path (TLS), if it offers one. */
  directPort: number | undefined;
  /** The iroh line it runs (nodes before lines were announced ran iroh035). */
  line: TransportLine;
  /** Its home relay, when it has one (absent: it is reached by direct addresses only). */
  relayUrl: string | undefined;
  /** How it stands with this node (checked here, never its word): an owner's machine, a guest, or a member of an unanchored mesh. */
  standing: "vouched" | "guest" | "member";
  /** A guest's pass: its name and expiry (ms since the epoch); none for a guest without a pass. */
  guest?: { name?: string; expiresAt?: number };
}

export interface MeshStatus {
  /** `starting` until the iroh endpoint is up. */
  state: "starting" | "running";
  nodeId: string | null;
  /** This node's iroh line and relay, once its mesh has started. */
  line?: TransportLine;
  relay?: string;
  peers: PeerStatus[];
  /** How this node stands under its roster (`unanchored`: it holds none, and every member may be elected host). */
  trust?: OwnTrust;
  /** Peers refused lately for their standing, and why. */
  refused?: Refusal[];
  /** What this node's control streams carried since it started (bytes and messages, each way). */
  control?: ControlCounters;
  /** A digest of the mesh's catalog as this node worked it out (`placement/catalog-digest.ts`): one digest across a mesh that agrees. */
  catalogDigest?: string;
}

/**
 * How this node's relay reads in a status (pure): its home relay once it has one, else what it was
 * told (`default` before iroh's public relays answer, `disabled`, or the mesh's own URLs).
 */
export function relayShown(setting: RelaySetting, home: string | undefined): string {
  if (setting === "disabled") return "disabled";
  return home ?? (Array.isArray(setting) ? setting.join(" ") : setting);
}

export { shortId };

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
      watched: p.watched,
      directPort: p.announcement.signedDirect?.port,
      line: p.announcement.transport ?? LEGACY_LINE,
      relayUrl: p.announcement.relayUrl,
      standing: p.standing.standing,
      ...(p.standing.standing === "guest" ? { guest: { ...(p.standing.name ? { name: p.standing.name } : {}), ...(p.standing.expiresAt ? { expiresAt: p.standing.expiresAt } : {}) } } : {}),
    }))
    .sort((a, b) => a.nodeId.localeCompare(b.nodeId));
  return { state: "running", nodeId: membership.selfId, peers, refused: [...membership.standings.refusals], control: { ...membership.sender.counters } };
}
