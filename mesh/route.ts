/**
 * Where a request for a model goes (pure), from the catalog every node derives alike: this node's
 * pool, or the node that hosts the model, or nowhere yet (503 with Retry-After), or nowhere at all
 * (404). A request that already crossed the mesh is answered where it lands.
 */
import type { CatalogModel } from "./catalog.ts";

export type Route =
  | { to: "local" }
  | { to: "peer"; peerId: string }
  | { to: "unavailable"; message: string; retryAfterS: number }
  | { to: "unknown" };

export interface LocalView {
  nodeId: string;
  /** The model's files are on this node's disk (or its registry names it). */
  known: boolean;
  /** Its files are all here (not just named by the registry, or still arriving). */
  hasFiles: boolean;
  /** This node's llama-server for it answers now. */
  ready: boolean;
}

const short = (id: string) => id.slice(0, 10);
const gib = (b: number) => `${(b / 2 ** 30).toFixed(2)} GiB`;

export function routeModel(entry: CatalogModel | undefined, self: LocalView, forwarded: boolean): Route {
  if (forwarded || self.ready) return self.known || self.ready ? { to: "local" } : { to: "unknown" };
  if (!entry) return self.known ? { to: "local" } : { to: "unknown" };
  if (entry.host === self.nodeId) {
    if (self.hasFiles) return { to: "local" };
    return { to: "unavailable", message: `model "${entry.name}" is being fetched by this node, its host; retry shortly`, retryAfterS: 10 };
  }
  switch (entry.status) {
    case "ready":
      return { to: "peer", peerId: entry.host! };
    case "loading":
      return { to: "unavailable", message: `model "${entry.name}" is loading on node ${short(entry.host!)}; retry shortly`, retryAfterS: 5 };
    case "needs-capacity":
      return {
        to: "unavailable",
        message: `model "${entry.name}" needs ${gib(entry.needBytes)} and the nodes assigned to it offer ${gib(entry.capacityBytes)}; it runs once more nodes join`,
        retryAfterS: 30,
      };
    case "unloaded": {
      // Nobody is assigned it (or it went idle): a node that has the file loads it on demand.
      if (self.known) return { to: "local" };
      const holder = entry.nodesOnDisk[0];
      if (holder) return { to: "peer", peerId: holder };
      return { to: "unavailable", message: `model "${entry.name}" is on no node yet; it is fetched from its source once a node is assigned it`, retryAfterS: 30 };
    }
  }
}
