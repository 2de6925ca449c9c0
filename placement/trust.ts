/**
 * Whose word counts (pure). Each node knows how it stands with every peer from signatures it
 * checked itself (`mesh/peer-standing.ts`): a machine of the owner (`vouched`), a `guest`, or, on a
 * node that holds no roster (an unanchored mesh, as every mesh was before rosters), a `member`
 * whose word counts as it always did. A guest's word never counts: its announcement takes no part
 * in this node's catalog (so it is never elected a host, a worker or a puller, never decides or
 * contests a model's content, never chooses a reference, never counts as demand and holds no
 * replica for this node), it serves none of this node's clients unless `--hosts` names it, gets
 * and gives no KV, unloads nothing, introduces nobody, loads nothing on demand and holds no RPC
 * session. A guest's own node reads its peers by the same rules: it trusts the owner's machines,
 * and no other guest.
 */
import { byCodePoint, type CatalogModel } from "./catalog.ts";

export type Standing = "member" | "vouched" | "guest";

/** Whether a peer's announcement, requests and streams count as an owner's machine's do (or every member's did, unanchored). */
export const counts = (s: Standing | undefined): boolean => s === "member" || s === "vouched";

/** The views that go into the catalog: this node's own, and those of peers whose word counts. */
export function placementViews<V extends { nodeId: string }>(views: readonly V[], selfId: string, standing: (id: string) => Standing | undefined): V[] {
  return views.filter((v) => v.nodeId === selfId || counts(standing(v.nodeId)));
}

/**
 * Whether `peer` may serve this node's clients: one whose word counts (within `--hosts` when it is
 * given), or a guest `--hosts` names by its id (the operator's explicit choice; `self` names none).
 */
export function mayServeClients(hosts: readonly string[], selfId: string, peer: string, standing: Standing | undefined): boolean {
  if (peer === selfId) return true;
  if (hosts.length > 0) return hosts.includes(peer);
  return counts(standing);
}

/**
 * A model's catalog entry with the guests `--hosts` names that announce they serve it added to its
 * servers (pure): the catalog never counts a guest, so this is the one way a guest serves this
 * node's clients, and only by the operator's word. A model only such guests serve gets an entry
 * of its own, ready at them.
 */
export function withNamedGuests(entry: CatalogModel | undefined, model: string, hosts: readonly string[], guests: readonly { nodeId: string; serving: readonly string[] }[]): CatalogModel | undefined {
  const named = guests.filter((g) => hosts.includes(g.nodeId) && g.serving.includes(model)).map((g) => g.nodeId).sort(byCodePoint);
  if (named.length === 0) return entry;
  // Beside its other servers, as a replica is: chosen among them, and taking requests while the host's are down.
  if (entry) return { ...entry, servers: [...entry.servers, ...named.filter((id) => !entry.servers.includes(id))] };
  return { name: model, source: undefined, sizeBytes: 0, needBytes: 0, nodesOnDisk: [], copyFrom: [], nodesServing: [], capacityBytes: 0, host: undefined, servedBy: named[0], servers: named, split: false, idle: false, status: "ready" };
}
