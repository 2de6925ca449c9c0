/**
 * What the router reads of the mesh (`MeshRouting`): the catalog, the route of each request, the
 * servers' loads, and the way to send a request to a peer. The route is a plain function of the
 * mesh's view (`routeInMesh`); this object only gathers its inputs: the catalog's entry, this
 * node's own side (its files, its server, its memory) and how long since it heard from each server.
 */
import type { CatalogModel } from "../placement/catalog.ts";
import type { AnnouncedLoad } from "../placement/pick-server.ts";
import { routeInMesh, type Chooser, type Route } from "../placement/route.ts";
import { counts, withNamedGuests } from "../placement/trust.ts";
import type { ModelInfo, ModelStore } from "../models/model-store.ts";
import type { ForwardedRequest, MeshForwarder } from "./mesh-forwarder.ts";
import { hasFiles } from "./model-fields.ts";
import type { MeshView } from "./mesh-view.ts";
import { type MeshRouting } from "./mesh-routing.ts";

export interface MeshRouterOptions {
  view: MeshView;
  store: Pick<ModelStore, "list" | "find">;
  needOf: (m: ModelInfo) => number;
  /** Memory this node offers the mesh. */
  vramBytes: number;
  /** `--hosts`: the nodes that may serve this node's clients (none: any member). */
  hosts: readonly string[];
  forwarder: Pick<MeshForwarder, "forward">;
  /** This node is a guest of its mesh (it serves its own clients from its own disk when the owner's machines cannot). */
  guest: () => boolean;
}

export class MeshRouter implements MeshRouting {
  constructor(private readonly o: MeshRouterOptions) {}

  nodeId(): string | undefined {
    return this.o.view.selfId();
  }

  catalog(): CatalogModel[] {
    return this.o.view.catalog();
  }

  async route(model: string, forwarded: boolean, choose?: Chooser, member?: string): Promise<Route> {
    const { view, store } = this.o;
    // A model a peer serves is not looked for on disk again (a rescan per request); an unknown one is.
    const entry = withNamedGuests(view.catalog().find((m) => m.name === model), model, this.o.hosts, view.guestServing());
    const info = store.list().find((m) => m.name === model) ?? (entry ? undefined : await store.find(model));
    const self = {
      nodeId: view.selfId() ?? "",
      model,
      known: info !== undefined,
      // A stat of every file: only asked when the route depends on it (never for a model served here now).
      get hasFiles() {
        return info !== undefined && hasFiles(info);
      },
      ready: view.verified.answering(model),
      needBytes: info ? this.o.needOf(info) : (entry?.needBytes ?? 0),
      vramBytes: this.o.vramBytes,
    };
    const fromGuest = member !== undefined && view.verified.standing(member) === "guest";
    return routeInMesh({ entry, self, forwarded, choose, hosts: this.o.hosts, silentMs: (id) => view.verified.silentMs(id), silentLimitMs: (id) => view.verified.silentLimitMs(id), fromGuest, selfGuest: this.o.guest() });
  }

  counts(nodeId: string): boolean {
    return counts(this.o.view.verified.standing(nodeId));
  }

  announcedLoad(nodeId: string, model: string): AnnouncedLoad | undefined {
    return this.o.view.announcedLoad(nodeId, model);
  }

  ownLoad(model: string): AnnouncedLoad | undefined {
    return this.o.view.verified.ownLoad(model);
  }

  forward(peerId: string, req: ForwardedRequest, signal: AbortSignal): Promise<Response> {
    return this.o.forwarder.forward(peerId, req, signal);
  }
}
