/**
 * What the serving core (`router/serving/`) needs from the mesh: this node's id, the catalog, where a request for a
 * model goes (`placement/route.ts` decides), what servers announce of their load, and how to send
 * a request to another node (`node/mesh-forwarder.ts`, over `mesh/http-stream.ts`). The node
 * implements it (`node/mesh-router.ts`); placement, the pure floor, knows nothing of sending.
 */
import type { CatalogModel } from "../placement/catalog.ts";
import type { AnnouncedLoad } from "../placement/pick-server.ts";
import type { Chooser, Route } from "../placement/route.ts";

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
