/** What the router needs from the mesh: its catalog, where a request for a model goes, and how to send it there. */
import type { CatalogModel } from "./catalog.ts";
import type { AnnouncedLoad } from "./pick-server.ts";
import type { Chooser, Route } from "./route.ts";

/** Names the node that answered a request, in its response (forwarded responses keep it). */
export const ANSWERED_BY_HEADER = "x-mesh-node";

export interface MeshRouting {
  /** This node's id, once its mesh endpoint is up. */
  nodeId(): string | undefined;
  catalog(): CatalogModel[];
  /**
   * `forwarded`: the request already crossed the mesh, so it is answered here. `choose` picks among
   * the model's servers when it has several (its host and replicas). `member`: the member that
   * forwarded it, whose standing decides whether it may load a model here on demand.
   */
  route(model: string, forwarded: boolean, choose?: Chooser, member?: string): Promise<Route>;
  /** Whether a member's word counts here (`trust.ts`): a guest's keep_alive and KV hints are not acted on. */
  counts?(nodeId: string): boolean;
  /** What a peer last announced about its server for `model` (slots, running, waiting), if it did. */
  announcedLoad?(nodeId: string, model: string): AnnouncedLoad | undefined;
  /** This node's own server for `model` now (slots, running, waiting), when one answers. */
  ownLoad?(model: string): AnnouncedLoad | undefined;
  forward(peerId: string, req: { method: string; path: string; headers: Record<string, string>; body: Uint8Array }, signal: AbortSignal): Promise<Response>;
}
