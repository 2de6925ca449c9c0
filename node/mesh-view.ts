/**
 * The one read-only view of the mesh that routing, replicas, the console and status read: every
 * node's view as it was announced (a claim: what a member says of itself, ours included, as we
 * announce it), the catalog worked out from those claims, and apart from them the facts this node
 * saw itself (when it last heard from each peer, which of its own servers answer, the content
 * identities it hashed, how each peer stands under the roster). Only peers whose word counts
 * (`placement/trust.ts`: the owner's machines, or every member of an unanchored mesh) go into the
 * views and the catalog: a guest's claims decide nothing here. The catalog is worked out again
 * only when something changed (a change the group reconciler heard of, or this node's own
 * fields), never per request.
 */
import { announcedLoad, type AnnouncedLoad } from "../placement/pick-server.ts";
import { catalog, type CatalogModel, type NodeView } from "../placement/catalog.ts";
import { counts, type Standing } from "../placement/trust.ts";
import type { Announcement } from "../mesh/messages.ts";
import { probablyGoneAfterMs } from "../mesh/watch-ring.ts";
import type { ModelInfo } from "../models/model-store.ts";
import type { LoadedServers } from "../pool/loaded-servers.ts";
import { takesRequests } from "../pool/wrapped-server.ts";
import { HEARTBEAT_MS } from "./mesh-node.ts";
import { nodeView, type ModelFields } from "./model-fields.ts";

/**
 * Two heartbeats without a sign of life: the peer is probably gone (it is dropped at three). A live
 * peer sends something every heartbeat (a beat only where QUIC's own packets did not, seen within
 * half a second), so one and a half left too little room.
 */
export const SILENT_MS = probablyGoneAfterMs(true, HEARTBEAT_MS);

/** What this node saw itself, as opposed to what members announced. */
export interface VerifiedFacts {
  /** How long since this node last heard from `id` (0 for this node, and for one it does not know). */
  silentMs(id: string): number;
  /** Silent longer than this, `id` is probably gone: longer for a member we do not watch. */
  silentLimitMs(id: string): number;
  /** This node's own server for `model` answers now (ready, not draining): seen in its pool, not announced. */
  answering(model: string): boolean;
  /** This node's own server for `model` now (slots, running, waiting), when one answers. */
  ownLoad(model: string): AnnouncedLoad | undefined;
  /** The content identity this node worked out from `m`'s files itself (none while it is hashing them). */
  contentIdentity(m: ModelInfo): string | undefined;
  /** How a peer stands with this node, from signatures it checked itself (none: not a peer now). */
  standing(id: string): Standing | undefined;
}

/** The mesh as this node sees it: claims (views, catalog, announcements) and, apart, verified facts. */
export interface MeshView {
  /** This node's id, once its mesh endpoint is up. */
  selfId(): string | undefined;
  /** How many members whose word counts this node has now (besides itself): the owner's machines, or every member unanchored. */
  peerCount(): number;
  /** The view as announced of this node (first) and of every peer whose word counts. */
  views(): NodeView[];
  /** What the guests among the peers announce they serve (their word, which serves none of this node's clients unless `--hosts` names them). */
  guestServing(): { nodeId: string; serving: string[] }[];
  /** The mesh's catalog, as worked out at the last change. */
  catalog(): CatalogModel[];
  /** Views and catalog together, as worked out at the last change (one read, one state). */
  snapshot(): { views: NodeView[]; catalog: CatalogModel[] };
  /** What a peer last announced about its server for `model` (slots, running, waiting), if it did. */
  announcedLoad(nodeId: string, model: string): AnnouncedLoad | undefined;
  /**
   * What node `id` announced of its slots, as every peer read it. For this node too: the demand of
   * its last announcement, not its live queue, so the rules worked out over it give every node the
   * same answer.
   */
  announcedDemand(id: string): unknown;
  readonly verified: VerifiedFacts;
}

/**
 * What node `id` announced of its slots, as every peer read it. For this node too: the demand of
 * its last announcement, not its live queue, or it would work the replica rule out over figures no
 * peer has and pick another answer than theirs.
 */
export function announcedDemandOf(id: string, selfId: string, peers: Pick<ViewPeers, "get" | "lastSent">): unknown {
  const a = id === selfId ? peers.lastSent : peers.get(id)?.announcement;
  return a?.demand;
}

/** The peers as the view reads them (`mesh/peer-table.ts`), and our announcement as they last got it. */
export interface ViewPeers extends ReadonlyMap<string, { id: string; announcement: Announcement; lastSeen: number; watched?: boolean; standing: { standing: Standing } }> {
  readonly lastSent: { demand?: unknown } | undefined;
}

export interface MeshViewOptions {
  /** This node's id once it takes part in its mesh's decisions (a joiner: once it hears its mesh). */
  selfId: () => string | undefined;
  peers: ViewPeers;
  /** Memory this node offers the mesh. */
  vramBytes: number;
  /** This node's own model fields as it announces them, and a number that moves whenever its disk fields do. */
  own: { announced(): ModelFields; readonly version: number };
  /** The pool's servers (what this node runs itself). */
  servers: Pick<LoadedServers, "server">;
  /** This node's own models' content identities (`models/model-identities.ts`). */
  identities: { of(m: ModelInfo): string | undefined };
  /** The clock `current` checks its view's age by (tests set it); performance.now() otherwise. */
  now?: () => number;
}

/** How long a worked-out view is read without checking our own state again (see `current`). */
const RECHECK_MS = 1_000;

/** The view as worked out, the key it was worked out for, and when that key was last checked. */
interface Worked {
  key: string;
  views: NodeView[];
  catalog: CatalogModel[];
  guests: { nodeId: string; serving: string[] }[];
  changes: number;
  ownMoves: number;
  ownVersion: number;
  at: number;
}

/**
 * The view, worked out once per change. Readers get it as `MeshView`; only the group reconciler
 * calls `heard`, when it hears of a change (membership reports a peer's announcement only when
 * its content changed).
 */
export class MeshViewCache implements MeshView {
  /** Bumped by every change the reconciler hears of. */
  private changes = 0;
  /** Bumped whenever our announcement may have moved: the next read checks our own fields. */
  private ownMoves = 0;
  private worked: Worked | undefined;
  readonly verified: VerifiedFacts;

  constructor(private readonly o: MeshViewOptions) {
    const silentMs = (id: string) => Date.now() - (o.peers.get(id)?.lastSeen ?? Date.now());
    this.verified = {
      silentMs,
      silentLimitMs: (id) => probablyGoneAfterMs(o.peers.get(id)?.watched !== false, HEARTBEAT_MS),
      answering: (model) => {
        const s = o.servers.server(model);
        return s !== undefined && takesRequests(s.state);
      },
      // Live, per request with a choice; one draining for a reload or an eviction has no slot for a new request.
      ownLoad: (model) => {
        const s = o.servers.server(model);
        return s !== undefined && takesRequests(s.state) ? s.queue.figures() : undefined;
      },
      contentIdentity: (m) => o.identities.of(m),
      standing: (id) => o.peers.get(id)?.standing.standing,
    };
  }

  /** The peers whose word counts here. */
  private counted() {
    return [...this.o.peers.values()].filter((p) => counts(p.standing.standing));
  }

  guestServing(): { nodeId: string; serving: string[] }[] {
    return this.current().guests;
  }

  /** A change was heard of: the next read works the catalog out again. */
  heard(): void {
    this.changes++;
  }

  /** Our own announcement may have moved (the node's `moved` signal): the next read checks our fields, and works the catalog out again if they moved. */
  ownMoved(): void {
    this.ownMoves++;
  }

  selfId(): string | undefined {
    return this.o.selfId();
  }

  peerCount(): number {
    return this.counted().length;
  }

  views(): NodeView[] {
    return this.current().views;
  }

  catalog(): CatalogModel[] {
    return this.current().catalog;
  }

  snapshot(): { views: NodeView[]; catalog: CatalogModel[] } {
    return this.current();
  }

  announcedLoad(nodeId: string, model: string): AnnouncedLoad | undefined {
    return announcedLoad(this.o.peers.get(nodeId)?.announcement, model);
  }

  announcedDemand(id: string): unknown {
    const self = this.o.selfId();
    return self === undefined ? undefined : announcedDemandOf(id, self, this.o.peers);
  }

  /**
   * Views and catalog as of the last change heard of. Our own announcement's moves are told too
   * (`ownMoved`), so between changes a request reads the catalog without working
   * out our fields again; a move of our own state that no one reported (a retry's countdown running
   * out) is seen within `RECHECK_MS`, when the key is worked out again.
   */
  private current(): Worked {
    const now = this.o.now?.() ?? performance.now();
    const w = this.worked;
    if (w && w.changes === this.changes && w.ownMoves === this.ownMoves && w.ownVersion === this.o.own.version && now - w.at < RECHECK_MS) return w;
    const self = this.o.selfId();
    const own = this.o.own.announced();
    const peers = this.counted();
    const key = JSON.stringify([
      this.o.own.version,
      self,
      own.serving,
      own.assigned,
      own.hosting,
      own.idle,
      own.fetches,
      own.fetching?.model,
      own.rpcProtocol,
      own.layout,
      own.replicating,
      own.loadFailed,
      // Not their seq: a peer may bump it without a change, as often as it likes. A guest made an owner's machine (or one refused) moves it.
      peers.map((p) => p.id),
    ]);
    const stamp = { changes: this.changes, ownMoves: this.ownMoves, ownVersion: this.o.own.version, at: now };
    if (w?.key === key && w.changes === this.changes) return Object.assign(w, stamp);
    const views = [nodeView(self ?? "", this.o.vramBytes, own), ...peers.map((p) => nodeView(p.id, p.announcement.vramBytes, p.announcement))];
    const guests = [...this.o.peers.values()].filter((p) => !counts(p.standing.standing) && p.announcement.serving.length > 0).map((p) => ({ nodeId: p.id, serving: p.announcement.serving }));
    this.worked = { key, views, catalog: catalog(views), guests, ...stamp };
    return this.worked;
  }
}
