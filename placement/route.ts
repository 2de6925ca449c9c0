/**
 * Where a request for a model goes (pure), from the catalog every node derives alike: this node's
 * pool, or the node that hosts the model, or nowhere yet (503 with Retry-After), or nowhere at all
 * (404). A model served by several nodes (its host and replicas) goes to the one the caller's
 * chooser picks. A request that already crossed the mesh is answered where it lands. `routeInMesh`
 * adds what this node saw itself (which servers it heard from lately) and `--hosts` on top.
 */
import type { CatalogModel } from "./catalog.ts";
import { shortId } from "../base/short-id.ts";

export type Route =
  | { to: "local" }
  | { to: "peer"; peerId: string }
  | { to: "unavailable"; message: string; retryAfterS: number }
  | { to: "unknown" };

export interface LocalView {
  nodeId: string;
  /** The model asked for, as the request names it. */
  model: string;
  /** The model's files are on this node's disk (or its registry names it). */
  known: boolean;
  /** Its files are all here (not just named by the registry, or still arriving). */
  hasFiles: boolean;
  /** This node's llama-server for it answers now. */
  ready: boolean;
  /** What running it alone here needs, and what this node offers (a load beyond that is refused). */
  needBytes: number;
  vramBytes: number;
}

export const gib = (b: number) => `${(b / 2 ** 30).toFixed(2)} GiB`;

/** A load of its own here, unless the model needs more memory than this node offers. */
function aloneHere(self: LocalView): Route {
  if (self.needBytes <= self.vramBytes) return { to: "local" };
  return {
    to: "unavailable",
    message: `model "${self.model}" needs ${gib(self.needBytes)} and this node offers ${gib(self.vramBytes)}; it runs once nodes with enough memory between them are assigned it`,
    retryAfterS: 30,
  };
}

/** Its host tries again on its own schedule: a request, forwarded or not, does not start a load that just failed. */
function failedLoad(entry: CatalogModel): Route {
  const retryInS = entry.failure?.retryInS ?? 10;
  return {
    to: "unavailable",
    message: `model "${entry.name}" failed to load on its host ${shortId(entry.host ?? "")}: ${entry.failure?.error ?? "see that node's log"}; it tries again within ${retryInS} s`,
    retryAfterS: Math.max(1, retryInS),
  };
}

/** Picks one of a model's servers (its host and replicas) for the request; none: the usual server. */
export type Chooser = (servers: readonly string[]) => string | undefined;

const toServer = (id: string, self: LocalView): Route => (id === self.nodeId ? { to: "local" } : { to: "peer", peerId: id });

export function routeModel(entry: CatalogModel | undefined, self: LocalView, forwarded: boolean, choose?: Chooser): Route {
  // A request that crossed the mesh was sent here to be answered here: only its sender chooses.
  if (self.ready && (forwarded || !choose)) return { to: "local" };
  if (self.ready) {
    const servers = entry?.servers.includes(self.nodeId) ? entry.servers : [self.nodeId, ...(entry?.servers ?? [])];
    return toServer(choose!(servers) ?? self.nodeId, self);
  }
  // Its own servers are down (a host reloading, gone or failed) while a replica answers: there meanwhile.
  if (!forwarded && entry && entry.status !== "ready" && entry.servers.length > 0) return toServer(choose?.(entry.servers) ?? entry.servers[0]!, self);
  if (entry?.status === "failed") return failedLoad(entry);
  if (forwarded) {
    // Sent here as its host, but the mesh has moved it (views differ for a moment): a load here
    // would run it alone, outside its group. The sender's client retries and lands right.
    if (entry && entry.host !== undefined && entry.host !== self.nodeId && entry.status !== "unloaded") {
      return { to: "unavailable", message: `model "${entry.name}" moved to node ${shortId(entry.host)}; retry`, retryAfterS: 1 };
    }
    // Its host, over the group's rpc-servers; otherwise a holder asked to load it alone.
    if (!self.known) return { to: "unknown" };
    return entry?.host === self.nodeId ? { to: "local" } : aloneHere(self);
  }
  if (!entry) return self.known ? aloneHere(self) : { to: "unknown" };
  const fetching = (where: string) => ({
    to: "unavailable" as const,
    message: `model "${entry.name}" is being fetched by ${where}, its host; retry shortly`,
    retryAfterS: 10,
  });
  switch (entry.status) {
    case "ready":
      return toServer(choose?.(entry.servers) ?? entry.servedBy!, self);
    case "loading": {
      // The host loads it when asked (it may have let it go for another model): send the request
      // there, where it waits for the load like on a single box; a host still fetching cannot.
      const host = entry.host!;
      if (host === self.nodeId) return self.hasFiles ? { to: "local" } : fetching("this node");
      if (entry.nodesOnDisk.includes(host)) return { to: "peer", peerId: host };
      // Its host is still fetching it and this node has the files: answered here meanwhile, as one
      // a request loads on demand (a 503 would make the client wait for a download it need not).
      return self.hasFiles ? aloneHere(self) : fetching(`node ${shortId(host)}`);
    }
    case "needs-capacity":
      // A group without a host: its members lend memory but none has the files or fetches them.
      if (entry.host === undefined) {
        return { to: "unavailable", message: `model "${entry.name}" has no host: the nodes assigned to it neither have its files nor fetch them; it runs once a node that has them joins`, retryAfterS: 30 };
      }
      return {
        to: "unavailable",
        message: `model "${entry.name}" needs ${gib(entry.needBytes)} and the nodes assigned to it offer ${gib(entry.capacityBytes)}; it runs once more nodes join`,
        retryAfterS: 30,
      };
    case "unloaded": {
      // Nobody is assigned it (or it went idle): a node that has the file loads it on demand.
      if (self.hasFiles) return aloneHere(self);
      const holder = entry.nodesOnDisk.find((id) => id !== self.nodeId);
      if (holder) return { to: "peer", peerId: holder };
      return { to: "unavailable", message: `model "${entry.name}" is on no node yet; it is fetched from its source once a node is assigned it`, retryAfterS: 30 };
    }
  }
}

/**
 * The operator's choice of hosts (`--hosts`) over a route worked out from the catalog (pure): a
 * request of this node's own clients goes only to a node `allowed` names. Another server of the
 * model it names takes it; else this node serves it itself when it can (its own copy, its own
 * memory); else 503, saying why. A request forwarded here is answered here, as ever.
 */
export function withinHosts(route: Route, entry: CatalogModel | undefined, self: LocalView, allowed: (id: string) => boolean): Route {
  if (route.to !== "peer" || allowed(route.peerId)) return route;
  const other = entry?.servers.find((id) => id !== self.nodeId && allowed(id));
  if (other) return { to: "peer", peerId: other };
  if (self.hasFiles && self.needBytes <= self.vramBytes) return { to: "local" };
  return {
    to: "unavailable",
    message: `model "${self.model}" is served by node ${shortId(route.peerId)}, which --hosts does not name, and this node cannot run it itself (${self.hasFiles ? `it needs ${gib(self.needBytes)}, this node offers ${gib(self.vramBytes)}` : "it has no copy"})`,
    retryAfterS: 30,
  };
}

/** Whether `id` may serve this node's clients under `--hosts` (whole ids; `self` names none but this node). */
export function hostAllowed(hosts: readonly string[], selfId: string, id: string): boolean {
  return hosts.length === 0 || id === selfId || hosts.includes(id);
}

/** What a request's route is worked out from, besides the catalog's entry and this node's side. */
export interface MeshRouteInput {
  entry: CatalogModel | undefined;
  self: LocalView;
  /** The request already crossed the mesh: it is answered here. */
  forwarded: boolean;
  /** Picks among the model's servers when it has several (its host and replicas). */
  choose?: Chooser;
  /** `--hosts`: the nodes that may serve this node's clients (none: any member). */
  hosts: readonly string[];
  /** How long since this node last heard from each node (its own clock, not their word; 0 for itself). */
  silentMs: (id: string) => number;
  /** Silent longer than this, a server is likely gone (longer for a member this node does not watch, `mesh/watch-ring.ts`). */
  silentLimitMs: (id: string) => number;
  /** A guest of the mesh forwarded the request: it gets a server that runs, or this node as the model's host, never a load on demand. */
  fromGuest?: boolean;
  /**
   * This node is a guest: it takes part in no group, so a model the owner's machines cannot serve
   * now is served here when this node has its files and the memory (its own local serving).
   */
  selfGuest?: boolean;
}

/**
 * Where a request goes in the mesh (pure): `routeModel` among the servers heard from lately and
 * named by `--hosts` (`withinHosts` for this node's own clients). A route to a peer that has gone
 * silent is a clear 503 now, which beats a request that waits for the connection to time out.
 */
export function routeInMesh(i: MeshRouteInput): Route {
  const { entry, self, forwarded, choose, silentMs } = i;
  const allowed = (id: string) => hostAllowed(i.hosts, self.nodeId, id);
  // A server that missed its heartbeats is likely gone: another one of the model takes the request.
  const live = (id: string) => silentMs(id) <= i.silentLimitMs(id);
  const chosen = routeModel(entry, self, forwarded, choose && ((servers) => choose(servers.filter((id) => live(id) && allowed(id)))));
  const route = forwarded ? chosen : withinHosts(chosen, entry, self, allowed);
  if (i.selfGuest && !forwarded && route.to === "unavailable" && self.hasFiles && self.needBytes <= self.vramBytes) return { to: "local" };
  if (i.fromGuest && route.to === "local" && !self.ready && entry?.host !== self.nodeId) {
    return { to: "unavailable", message: `model "${self.model}" is not running on this node, which loads models on demand only for its owner's machines and its own clients`, retryAfterS: 30 };
  }
  if (route.to === "peer" && !live(route.peerId)) {
    const message = `the node hosting model "${self.model}" (${shortId(route.peerId)}) has not been heard from for ${Math.round(silentMs(route.peerId) / 1000)} s; retry shortly`;
    return { to: "unavailable", message, retryAfterS: 5 };
  }
  return route;
}
