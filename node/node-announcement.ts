/**
 * What this node tells its peers of itself, assembled here from its parts: its addresses, its
 * role, the memory it offers and the machine's RAM, its models (`model-announcer.ts`: on disk,
 * served, its group's state), its API port, when its servers were last used (to 10 s) and their
 * queues (`announcedDemand`), its versions and its direct path. `mesh-node.ts` adds the iroh line,
 * the ring (both follow the line) and the roster claim, and `AnnouncementSource` the sequence.
 */
import { totalmem } from "node:os";
import pkg from "../package.json" with { type: "json" };
import { announcedDemand, type AnnouncementContent } from "../mesh/announcement.ts";
import type { Pool } from "../pool/pool.ts";
import type { ModelAnnouncer } from "./model-announcer.ts";

export interface NodeAnnouncementParts {
  pool: Pick<Pool, "loaded" | "queueFigures">;
  models: Pick<ModelAnnouncer, "announced">;
  /** The port of the rpc-server this node offers, once it is up. */
  rpcPort: () => number | undefined;
  vramBytes: number;
  apiPort: number;
  startedAtMs: number;
  llamaBuild: string | undefined;
  /** The direct TLS path this node offers, once it listens. */
  direct: () => { port: number; certSha256: string } | undefined;
}

/** The machine's RAM does not change while the node runs; reading it every heartbeat showed in profiles. */
const RAM_BYTES = totalmem();

export function nodeAnnouncement(p: NodeAnnouncementParts): (nodeId: string, addresses: string[], relayUrl?: string) => Omit<AnnouncementContent, "ring"> {
  return (nodeId, addresses, relayUrl) => {
    const direct = p.direct();
    return {
      nodeId,
      addresses,
      ...(relayUrl ? { relayUrl } : {}),
      role: p.pool.loaded().length ? "host" : p.rpcPort() ? "worker" : "idle",
      vramBytes: p.vramBytes,
      ramBytes: RAM_BYTES,
      beats: true,
      ...p.models.announced(),
      apiPort: p.apiPort,
      // To 10 s: every request would otherwise be an announcement to every peer.
      lastRequest: Object.fromEntries(p.pool.loaded().map((s) => [s.model, Math.floor(s.lastUse / 10_000) * 10_000])),
      // Every heartbeat's: `AnnouncementSource` does not count it as a change.
      demand: announcedDemand(p.pool.queueFigures()),
      meshVersion: pkg.version,
      startedAt: p.startedAtMs,
      llamaBuild: p.llamaBuild ?? "unknown",
      ...(direct ? { signedDirect: direct } : {}),
    };
  };
}
