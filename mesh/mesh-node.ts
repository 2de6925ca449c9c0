/**
 * This node's place in the mesh: identity and mesh secret from the state dir, the iroh endpoint,
 * authenticated membership, the join token it prints, and announcements kept current.
 */
import type { Config } from "../config/config.ts";
import type { Log } from "../log.ts";
import { AnnouncementSource, type AnnouncementContent } from "./announcement.ts";
import { loadOrCreateNodeKey, resolveMeshSecret } from "./identity.ts";
import { encodeJoinToken } from "./join-token.ts";
import { Membership } from "./membership.ts";
import { meshStatus, type MeshStatus } from "./status.ts";
import { Transport } from "./transport.ts";

/** Heartbeat and silence limit: a killed peer is gone from every view within about 7 s. */
export const HEARTBEAT_MS = 2_000;
export const PEER_TIMEOUT_MS = 6_000;

export interface MeshNode {
  nodeId: string;
  token: string;
  founded: boolean;
  membership: Membership;
  status(): MeshStatus;
  /** Sends our announcement now if it changed since the last one. */
  announceIfChanged(): void;
  /** Says goodbye to every peer and closes the endpoint. */
  stop(): Promise<void>;
}

export async function startMesh(config: Config, content: (nodeId: string, addresses: string[], relayUrl?: string) => AnnouncementContent, log: Log): Promise<MeshNode> {
  const secretKey = loadOrCreateNodeKey(config.stateDir);
  const { secret, founded } = resolveMeshSecret(config.stateDir, config.join?.secret);
  let membership: Membership | undefined;
  const early: Parameters<Membership["accept"]>[0][] = [];
  const transport = await Transport.bind({
    secretKey,
    bind: config.quicBind,
    relay: config.relay,
    onConnection: (conn) => (membership ? void membership.accept(conn) : void early.push(conn)),
  });
  const addr = await transport.addr();
  const source = new AnnouncementSource(() => content(addr.nodeId, addr.addresses, addr.relayUrl));
  membership = new Membership({
    transport,
    secret,
    announcement: () => source.current().announcement,
    log,
    heartbeatMs: HEARTBEAT_MS,
    peerTimeoutMs: PEER_TIMEOUT_MS,
  });
  for (const conn of early.splice(0)) void membership.accept(conn);
  const token = encodeJoinToken({ addr, secret });
  if (config.join) void membership.join(config.join.addr);
  const m = membership;
  return {
    nodeId: transport.nodeId,
    token,
    founded,
    membership: m,
    status: () => meshStatus(m, token),
    announceIfChanged: () => {
      if (source.current().changed) m.announce();
    },
    stop: async () => {
      await m.leave();
      await transport.close();
    },
  };
}
