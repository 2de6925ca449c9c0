/**
 * The console's view of a running node: gathers what `consoleState` needs from the mesh, the
 * catalog, the pool and the tunnels, and keeps the little the console remembers on its own (nodes
 * that left, when each model started loading, how each peer is reached, which iroh is asked
 * between states rather than per state).
 */
import type { ConsoleNode, ConsoleState, QuicPath } from "../console/protocol.ts";
import type { Log } from "../base/log.ts";
import { peerLabel, tunnelBytes } from "../metrics/labels.ts";
import { HEARTBEAT_MS, type MeshNode } from "./mesh-node.ts";
import type { LogRing } from "../base/log-ring.ts";
import type { Pool } from "../pool/pool.ts";
import type { Tunnels } from "../tunnel/tunnels.ts";
import { consoleState, rememberGone } from "./console-state.ts";
import type { MeshView } from "./mesh-view.ts";

/** What the console's feed (`router/console/console-feed.ts`) reads from a node. */
export interface ConsoleSources {
  state(): ConsoleState;
  logs: LogRing;
  log: Pick<Log, "warn">;
  /** Tunnel bytes by peer short id, for the traffic samples. */
  tunnelBytes(): Map<string, { in: number; out: number }>;
  /** Work that must not run per state (asking iroh how each peer is reached), done between states. */
  refresh(): Promise<void>;
}

export interface ConsoleSourceParts {
  version: string;
  mesh: () => MeshNode | undefined;
  /** The mesh's view: every node's view and the catalog, as routing and status read them. */
  view: Pick<MeshView, "views" | "catalog">;
  pool: Pick<Pool, "loaded" | "isLoading">;
  tunnels: Pick<Tunnels, "counters">;
  logs: LogRing;
  log: Pick<Log, "warn">;
}

/** A connection closing as we ask has no round trip to tell. */
function rttOf(conn: { rttMs(): number }): number | null {
  try {
    return conn.rttMs();
  } catch {
    return null;
  }
}

const PATHS_EVERY_MS = 2_000;
/** iroh answers in microseconds; one that does not is not waited for (the paths already known stay). */
const PATHS_DEADLINE_MS = 1_000;

export function consoleSource(parts: ConsoleSourceParts): ConsoleSources {
  let shown: { nodes: ConsoleNode[]; at: number } = { nodes: [], at: Date.now() };
  const loadingSince = new Map<string, number>();
  const paths = new Map<string, QuicPath>();
  let pathsAt = 0;
  /** The asking in progress: a page opened meanwhile waits for it rather than show paths not known yet. */
  let refreshing: Promise<void> | undefined;

  const askPaths = async () => {
    const mesh = parts.mesh();
    // A path changes when iroh upgrades or loses one: every couple of seconds is often enough to ask.
    if (!mesh || Date.now() - pathsAt < PATHS_EVERY_MS) return;
    pathsAt = Date.now();
    const ids = [...mesh.membership.peers.keys()];
    for (const id of paths.keys()) if (!ids.includes(id)) paths.delete(id);
    const asked = Promise.all(ids.map(async (id) => paths.set(id, await mesh.quicPath(id).catch(() => "none" as const))));
    await Promise.race([asked, Bun.sleep(PATHS_DEADLINE_MS)]);
  };

  const state = (): ConsoleState => {
    const now = Date.now();
    const mesh = parts.mesh();
    const peers = [...(mesh?.membership.peers.values() ?? [])].sort((a, b) => (a.id < b.id ? -1 : 1));
    const catalog = parts.view.catalog();
    const local = parts.pool.loaded();
    const loadingHere = new Set(catalog.map((m) => m.name).filter((name) => parts.pool.isLoading(name)));
    const loading = new Set(catalog.filter((m) => m.status === "loading" || loadingHere.has(m.name)).map((m) => m.name));
    for (const name of loadingSince.keys()) if (!loading.has(name)) loadingSince.delete(name);
    for (const name of loading) if (!loadingSince.has(name)) loadingSince.set(name, now);
    const gone = rememberGone(shown.nodes, new Set([...(mesh ? [mesh.nodeId] : []), ...peers.map((p) => p.id)]), now, shown.at);
    const s = consoleState({
      now,
      version: parts.version,
      heartbeatMs: HEARTBEAT_MS,
      self: mesh?.membership.own(),
      peers: peers.map((p) => {
        const counters = parts.tunnels.counters.get(p.id);
        const bytes = counters ? tunnelBytes(counters) : { in: 0, out: 0 };
        return {
          announcement: p.announcement,
          lastSeenMsAgo: now - p.lastSeen,
          watched: p.watched,
          rttMs: rttOf(p.conn),
          quicPath: paths.get(p.id) ?? "none",
          tunnel: { ...bytes, direct: counters?.direct ?? false },
          standing: p.standing,
        };
      }),
      views: parts.view.views(),
      catalog,
      local: local.map((s) => ({ model: s.model, pinned: s.pinned })),
      loadingHere,
      loadingSince,
      gone,
      trust: mesh?.trust() ?? { state: "unanchored" },
    });
    shown = { nodes: s.nodes, at: now };
    return s;
  };

  return {
    state,
    logs: parts.logs,
    tunnelBytes: () => new Map([...parts.tunnels.counters].map(([id, c]) => [peerLabel(id), tunnelBytes(c)])),
    log: parts.log,
    refresh: () => (refreshing ??= askPaths().finally(() => (refreshing = undefined))),
  };
}
