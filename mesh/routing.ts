/** What the router needs from the mesh: its catalog, where a request for a model goes, and how to send it there. */
import type { CatalogModel } from "./catalog.ts";
import type { Route } from "./route.ts";

/** Names the node that answered a request, in its response (forwarded responses keep it). */
export const ANSWERED_BY_HEADER = "x-mesh-node";

export interface MeshRouting {
  /** This node's id, once its mesh endpoint is up. */
  nodeId(): string | undefined;
  catalog(): CatalogModel[];
  /** `forwarded`: the request already crossed the mesh, so it is answered here. */
  route(model: string, forwarded: boolean): Promise<Route>;
  forward(peerId: string, req: { method: string; path: string; headers: Record<string, string>; body: Uint8Array }, signal: AbortSignal): Promise<Response>;
}
