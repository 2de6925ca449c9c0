/**
 * What the console shows of the mesh, worked out from what this node knows (pure): every node with
 * its announcement, liveness, path and use of memory, and every model of the catalog with its
 * status, group and the share of layers each member runs. Shares follow the memory each member
 * offers, as the host's `--tensor-split` does (`SplitPlanner.rpcSplit`).
 */
import type { ConsoleModel, ConsoleNode, ConsoleModelStatus, ConsoleState, GroupRole, QuicPath } from "../console/protocol.ts";
import { CONSOLE_LIMITS } from "../console/protocol.ts";
import type { CatalogModel, NodeView } from "../placement/catalog.ts";
import type { Announcement } from "../mesh/messages.ts";
import type { Verdict } from "../mesh/peer-standing.ts";
import type { OwnTrust } from "../mesh/roster-state.ts";
import { shortId } from "../mesh/status.ts";
import { LEGACY_LINE } from "../mesh/transport.ts";
import { probablyGoneAfterMs } from "../mesh/watch-ring.ts";

export interface ConsolePeer {
  announcement: Announcement;
  lastSeenMsAgo: number;
  /** This node watches it (`mesh/watch-ring.ts`); one it does not is heard from at QUIC's keep-alives only. */
  watched?: boolean;
  rttMs: number | null;
  quicPath: QuicPath;
  /** Its RPC tunnel bytes and whether they went over the direct TLS path, from this node's counters. */
  tunnel: { in: number; out: number; direct: boolean };
  /** How it stands with this node (the roster's verdict this node checked). */
  standing: Verdict;
}

/** A server of this node's pool. */
export interface LocalServer {
  model: string;
  pinned: boolean;
}

export interface ConsoleInput {
  now: number;
  version: string;
  heartbeatMs: number;
  /** Our own announcement; undefined until the mesh endpoint is up. */
  self: Announcement | undefined;
  peers: readonly ConsolePeer[];
  /** Every node's view, ours first, and the catalog worked out from them. */
  views: readonly NodeView[];
  catalog: readonly CatalogModel[];
  local: readonly LocalServer[];
  /** Models this node's pool is loading now (on demand too, which the catalog shows only once ready). */
  loadingHere: ReadonlySet<string>;
  /** When this node first saw each model loading (its own loads, and the mesh's). */
  loadingSince: ReadonlyMap<string, number>;
  /** Nodes that left, as last shown (see `rememberGone`). */
  gone: readonly ConsoleNode[];
  /** This node's own standing under its roster. */
  trust: OwnTrust;
}

/** A member of a model's group, its role and the share of the layers it runs. */
type Member = ConsoleModel["members"][number];

/** The group of a model: the host, the workers its server runs over (or is to), members standing by, and other nodes serving it. */
export function groupOf(m: CatalogModel, views: readonly NodeView[]): Member[] {
  const view = (id: string) => views.find((v) => v.nodeId === id);
  const host = m.host ?? m.servedBy;
  if (host === undefined) return m.nodesServing.map((id) => ({ id, role: "standby", share: 0 }));
  // A running host names its workers; one still loading a split runs over the rest of the group.
  const layout = view(host)?.layout;
  const workers = layout ?? (m.split ? m.nodesServing.filter((id) => id !== host) : []);
  const running = [host, ...workers];
  const memory = running.map((id) => view(id)?.vramBytes ?? 0);
  const total = memory.reduce((a, b) => a + b, 0);
  const share = (i: number) => (running.length === 1 ? 1 : total > 0 ? memory[i]! / total : 1 / running.length);
  const members: Member[] = running.map((id, i) => ({ id, role: i === 0 ? "host" : "worker", share: share(i) }));
  // Any other node whose server answers for it runs it whole: a replica, an old host handing over, a load on demand.
  const serves = (id: string) => view(id)?.ready.includes(m.name) === true;
  const whole = (id: string): Member => ({ id, role: view(id)?.replicating?.includes(m.name) ? "replica" : "host", share: 1 });
  for (const id of m.nodesServing) if (!running.includes(id)) members.push(serves(id) ? whole(id) : { id, role: "standby", share: 0 });
  for (const v of views) if (serves(v.nodeId) && !members.some((x) => x.id === v.nodeId)) members.push(whole(v.nodeId));
  return members;
}

function statusOf(m: CatalogModel, fetching: NodeView | undefined, loadingHere: boolean): ConsoleModelStatus {
  if (fetching && (m.status === "loading" || m.status === "unloaded")) return "fetching";
  return m.status === "unloaded" && loadingHere ? "loading" : m.status;
}

function modelOf(m: CatalogModel, input: ConsoleInput, announcements: readonly Announcement[]): ConsoleModel {
  const fetcher = input.views.find((v) => v.fetching === m.name);
  const fetchOf = announcements.find((a) => a.nodeId === fetcher?.nodeId)?.fetching;
  const status = statusOf(m, fetcher, input.loadingHere.has(m.name));
  const file = announcements.flatMap((a) => a.modelsOnDisk).find((d) => d.name === m.name);
  const self = input.self;
  const local = input.local.find((s) => s.model === m.name);
  const since = input.loadingSince.get(m.name);
  return {
    name: m.name,
    status,
    ...(status === "fetching" && fetchOf && fetcher ? { fetch: { node: fetcher.nodeId, bytes: fetchOf.bytes, total: fetchOf.total, from: fetchOf.from } } : {}),
    ...(status === "loading" && since !== undefined ? { loadingForS: Math.max(0, Math.round((input.now - since) / 1000)) } : {}),
    ...(status === "needs-capacity" ? { missingBytes: Math.max(0, m.needBytes - m.capacityBytes) } : {}),
    ...(m.failure ? { failure: m.failure } : {}),
    host: m.host ?? null,
    servedBy: m.servedBy ?? null,
    members: groupOf(m, input.views),
    split: m.split,
    type: file?.type ?? null,
    caps: m.caps ?? null,
    quant: file?.quant ?? null,
    sizeBytes: m.sizeBytes,
    needBytes: m.needBytes,
    origin: m.ref ?? m.source ?? null,
    nodesOnDisk: m.nodesOnDisk,
    onThisNode: self !== undefined && self.modelsOnDisk.some((d) => d.name === m.name),
    loadedHere: self !== undefined && self.serving.includes(m.name),
    pinned: local?.pinned ?? false,
  };
}

/** Each node's place in the groups and the memory it gives them (what a ready or loading model takes of it). */
function placesOf(models: readonly ConsoleModel[], catalog: readonly CatalogModel[]): Map<string, { roles: ConsoleNode["roles"]; usedBytes: number }> {
  const places = new Map<string, { roles: ConsoleNode["roles"]; usedBytes: number }>();
  const at = (id: string) => places.get(id) ?? places.set(id, { roles: [], usedBytes: 0 }).get(id)!;
  for (const m of models) {
    const need = catalog.find((c) => c.name === m.name)?.needBytes ?? 0;
    const running = m.status === "ready" || m.status === "loading";
    for (const member of m.members) {
      const place = at(member.id);
      place.roles.push({ model: m.name, role: member.role });
      if (running) place.usedBytes += Math.round(need * member.share);
    }
  }
  return places;
}

const byRole: Record<GroupRole, number> = { host: 0, worker: 1, replica: 2, standby: 3 };

function nodeOf(a: Announcement, self: boolean, peer: ConsolePeer | undefined, input: ConsoleInput, place: { roles: ConsoleNode["roles"]; usedBytes: number } | undefined): ConsoleNode {
  const lastSeenMsAgo = peer?.lastSeenMsAgo ?? 0;
  // Something is wrong, though the peer is not dropped yet (half a second of room for the look that saw it).
  const silent = lastSeenMsAgo > probablyGoneAfterMs(peer?.watched !== false, input.heartbeatMs) + 500;
  return {
    id: a.nodeId,
    shortId: shortId(a.nodeId),
    self,
    state: silent ? "silent" : "up",
    lastSeenMsAgo,
    addresses: a.addresses,
    quicPath: self ? "self" : (peer?.quicPath ?? "none"),
    directTls: peer?.tunnel.direct ?? false,
    offersDirect: a.signedDirect !== undefined,
    rttMs: self ? null : (peer?.rttMs ?? null),
    line: a.transport ?? LEGACY_LINE,
    relayUrl: a.relayUrl ?? null,
    memoryOfferedBytes: a.vramBytes,
    memoryUsedBytes: place?.usedBytes ?? 0,
    ramBytes: a.ramBytes,
    roles: [...(place?.roles ?? [])].sort((x, y) => byRole[x.role] - byRole[y.role] || (x.model < y.model ? -1 : 1)),
    meshVersion: a.meshVersion,
    llamaBuild: a.llamaBuild,
    rpcProtocol: a.rpcProtocol,
    uptimeS: a.startedAt !== undefined ? Math.max(0, Math.round((input.now - a.startedAt) / 1000)) : null,
    apiPort: a.apiPort,
    tunnelBytes: { in: peer?.tunnel.in ?? 0, out: peer?.tunnel.out ?? 0 },
    ...standingOf(self ? input.trust : peer?.standing, a),
  };
}

/** A node's standing as the console shows it: this node's own, or a peer's verdict. */
function standingOf(s: OwnTrust | Verdict | undefined, a: Announcement): Pick<ConsoleNode, "standing" | "guest" | "claimsServing"> {
  const kind = s === undefined ? "member" : "state" in s ? (s.state === "unanchored" ? "member" : s.state) : s.standing === "refused" ? "guest" : s.standing;
  if (kind !== "guest") return { standing: kind, guest: null, claimsServing: [] };
  const pass = s as { name?: string; expiresAt?: number };
  // This node's own models are its own to serve; a guest peer's claim serves nobody here.
  const claims = s !== undefined && "state" in s ? [] : a.serving;
  return { standing: "guest", guest: { name: pass.name ?? null, expiresAt: pass.expiresAt ?? null }, claimsServing: claims };
}

export function consoleState(input: ConsoleInput): ConsoleState {
  const announcements = [...(input.self ? [input.self] : []), ...input.peers.map((p) => p.announcement)];
  const models = input.catalog.map((m) => modelOf(m, input, announcements));
  const places = placesOf(models, input.catalog);
  const up = announcements.map((a, i) => nodeOf(a, input.self !== undefined && i === 0, input.peers.find((p) => p.announcement.nodeId === a.nodeId), input, places.get(a.nodeId)));
  const present = new Set(up.map((n) => n.id));
  return {
    version: input.version,
    self: input.self?.nodeId ?? null,
    at: input.now,
    nodes: [...up, ...input.gone.filter((n) => !present.has(n.id))],
    models,
    trust: { state: input.trust.state, roster: "roster" in input.trust ? input.trust.roster : null, closed: "closed" in input.trust && input.trust.closed, refused: "refused" in input.trust ? (input.trust.refused ?? null) : null },
  };
}

/**
 * The nodes to show as gone now (pure): those shown before that are not `present` now, marked gone
 * with their last figures; the most recent `CONSOLE_LIMITS.goneNodes`, each for
 * `CONSOLE_LIMITS.goneForMs`. A node back in the mesh is no longer gone.
 */
export function rememberGone(before: readonly ConsoleNode[], present: ReadonlySet<string>, at: number, previousAt: number): ConsoleNode[] {
  const left = before
    .filter((n) => !present.has(n.id))
    .map((n) => ({ ...n, state: "gone" as const, lastSeenMsAgo: n.lastSeenMsAgo + (at - previousAt), roles: [], memoryUsedBytes: 0 }))
    .filter((n) => n.lastSeenMsAgo <= CONSOLE_LIMITS.goneForMs);
  return left.sort((a, b) => a.lastSeenMsAgo - b.lastSeenMsAgo).slice(0, CONSOLE_LIMITS.goneNodes);
}
