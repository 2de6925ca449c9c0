/**
 * The mesh's view: claims (what members announce, ours as we announce it) and the catalog worked
 * out from them once per change, apart from what this node saw itself (when it last heard from a
 * peer, which of its own servers answer).
 */
import { describe, expect, test } from "bun:test";
import { fakeAnnouncement } from "../../harness/rogue-peer.ts";
import type { Announcement } from "../../mesh/messages.ts";
import { MeshViewCache, type ViewPeers } from "../../node/mesh-view.ts";
import type { ModelFields } from "../../node/model-fields.ts";
import type { LoadedServers } from "../../pool/loaded-servers.ts";
import type { Standing } from "../../placement/trust.ts";

const MEMBER = { standing: "member" as Standing };

const own = (over: Partial<ModelFields> = {}): ModelFields => ({ modelsOnDisk: [], seeds: [], serving: [], hosting: false, idle: [], fetches: true, rpcProtocol: "3.0.0", keepsLayouts: true, hostsOnlyGetters: true, prefersSeeingHosts: true, replicating: [], takesReplicas: false, ...over });

function setup() {
  let fields = own({ modelsOnDisk: [{ name: "m", size: 100, need: 120 }] });
  const peers = Object.assign(new Map<string, { id: string; announcement: Announcement; lastSeen: number; standing: { standing: Standing } }>(), { lastSent: { demand: [{ model: "m", queued: 1 }] } });
  let meshUp = false;
  let now = 0;
  const servers = new Map<string, { state: string; queue: { figures: () => { slots: number; inFlight: number; queued: number } } }>();
  const pool = { server: (m: string) => servers.get(m) } as unknown as LoadedServers;
  const view = new MeshViewCache({ selfId: () => (meshUp ? "me" : undefined), peers, vramBytes: 200, own: { announced: () => fields, version: 0 }, servers: pool, identities: { of: () => "content" }, now: () => now });
  return { view, peers, servers, up: () => void (meshUp = true), setOwn: (f: ModelFields) => void (fields = f), later: (ms: number) => void (now += ms) };
}

describe("MeshViewCache", () => {
  test("before the mesh is up: no id, no peers, and our own view (claims) alone", () => {
    const { view } = setup();
    expect(view.selfId()).toBeUndefined();
    expect(view.peerCount()).toBe(0);
    expect(view.views().map((v) => v.nodeId)).toEqual([""]);
    expect(view.catalog().map((m) => m.name)).toEqual(["m"]);
    expect(view.announcedDemand("me")).toBeUndefined();
  });

  test("ours first, then each peer as it announced itself; the catalog is the same object until a change", () => {
    const { view, peers, up, setOwn, later } = setup();
    up();
    peers.set("a", { id: "a", announcement: fakeAnnouncement("a"), lastSeen: Date.now(), standing: MEMBER });
    view.heard();
    expect(view.views().map((v) => v.nodeId)).toEqual(["me", "a"]);
    const first = view.catalog();
    expect(view.catalog()).toBe(first);
    expect(view.snapshot().catalog).toBe(first);
    // Our own state moving, told (our announcement moved): a change, seen at once.
    setOwn(own({ modelsOnDisk: [{ name: "m", size: 100, need: 120 }], serving: ["m"] }));
    view.ownMoved();
    expect(view.catalog()).not.toBe(first);
    const second = view.catalog();
    // Told, but nothing of ours moved: the same catalog.
    view.ownMoved();
    expect(view.catalog()).toBe(second);
    // A change heard of is worked out again.
    view.heard();
    expect(view.catalog()).not.toBe(second);
    expect(view.catalog()).toEqual(second);
    const third = view.catalog();
    // Our state moving with no one telling: read as it was until the recheck, then seen.
    setOwn(own({ modelsOnDisk: [{ name: "m", size: 100, need: 120 }] }));
    later(500);
    expect(view.catalog()).toBe(third);
    later(600);
    expect(view.catalog()).not.toBe(third);
    expect(view.catalog().find((m) => m.name === "m")?.servers ?? []).toEqual([]);
  });

  test("announced load and demand are claims, read from announcements (ours: the last one sent)", () => {
    const { view, peers, up } = setup();
    up();
    peers.set("a", { id: "a", announcement: { ...fakeAnnouncement("a"), demand: [{ model: "m", slots: 2, inFlight: 1, queued: 0, waitMs: 0 }] } as Announcement, lastSeen: Date.now(), standing: MEMBER });
    expect(view.announcedLoad("a", "m")).toEqual({ slots: 2, inFlight: 1, queued: 0 });
    expect(view.announcedLoad("b", "m")).toBeUndefined();
    expect(view.announcedDemand("me")).toEqual([{ model: "m", queued: 1 }]);
  });

  test("verified facts are this node's own: silence by its clock, its own servers answering, identities it hashed", () => {
    const { view, peers, servers, up } = setup();
    up();
    peers.set("a", { id: "a", announcement: fakeAnnouncement("a"), lastSeen: Date.now() - 5_000, standing: MEMBER });
    expect(view.verified.silentMs("a")).toBeGreaterThanOrEqual(5_000);
    expect(view.verified.silentMs("unknown")).toBe(0);
    const figures = { slots: 1, inFlight: 0, queued: 0 };
    servers.set("m", { state: "ready", queue: { figures: () => figures } });
    servers.set("d", { state: "draining", queue: { figures: () => figures } });
    servers.set("l", { state: "starting", queue: { figures: () => figures } });
    expect(["m", "d", "l", "none"].map((m) => view.verified.answering(m))).toEqual([true, false, false, false]);
    expect(view.verified.ownLoad("m")).toEqual(figures);
    expect(view.verified.ownLoad("d")).toBeUndefined();
    expect(view.verified.contentIdentity({ name: "m" } as never)).toBe("content");
  });
});
