/**
 * Issue 45: the mesh router at its seam. A real `MeshRouter` over a real `MeshViewCache`, fed by
 * the membership as the view reads it (peers' announcements, standings, when each was last heard)
 * and this node's own pool and disk: where a request goes for each case, in a table, and the
 * forward handed to the forwarder as it came.
 */
import { describe, expect, test } from "bun:test";
import { fakeAnnouncement } from "../../harness/rogue-peer.ts";
import type { Announcement } from "../../mesh/messages.ts";
import type { ModelInfo } from "../../models/model-store.ts";
import { MeshRouter } from "../../node/mesh-router.ts";
import { MeshViewCache, SILENT_MS, type ViewPeers } from "../../node/mesh-view.ts";
import type { ForwardedRequest } from "../../node/mesh-forwarder.ts";
import type { Route } from "../../placement/route.ts";
import type { Standing } from "../../placement/trust.ts";

const SELF = "a".repeat(64);
const HOST = "b".repeat(64);
const GUEST = "c".repeat(64);
const GIB = 2 ** 30;
/** m as an announcement names it: its size and what it needs to run. */
const M = { name: "m", size: GIB, need: 2 * GIB };

interface Peer {
  id: string;
  standing: Standing;
  /** How long since it was heard from. */
  silentMs?: number;
  announcement: Partial<Announcement>;
}

/** A peer that hosts and serves `m`. */
const hostOf = (id: string, standing: Standing, silentMs = 0): Peer => ({
  id,
  standing,
  silentMs,
  announcement: { vramBytes: 8 * GIB, modelsOnDisk: [M], serving: ["m"], assigned: "m", hosting: true },
});

/** The router of a node that has `ownFiles` on disk, `m` loaded when `serving`, these peers and `--hosts`. */
function routerOf(o: { peers?: Peer[]; serving?: boolean; ownFiles?: boolean; hosts?: string[] } = {}) {
  const now = Date.now();
  const peers = new Map(
    (o.peers ?? []).map((p) => [p.id, { id: p.id, announcement: { ...fakeAnnouncement(p.id), ...p.announcement }, lastSeen: now - (p.silentMs ?? 0), standing: { standing: p.standing } }] as const),
  );
  const table = Object.assign(peers as unknown as Map<string, never>, { lastSent: undefined }) as unknown as ViewPeers;
  const own = fakeAnnouncement(SELF);
  const info: ModelInfo | undefined = o.ownFiles ? ({ name: "m", path: "/models/m.gguf", files: [], sizeBytes: GIB } as unknown as ModelInfo) : undefined;
  const ready = { state: "ready", queue: { figures: () => ({ slots: 1, inFlight: 0, queued: 0, waitMs: 0 }) } };
  const view = new MeshViewCache({
    selfId: () => SELF,
    peers: table,
    vramBytes: 8 * GIB,
    own: { announced: () => ({ ...own, ...(o.serving ? { serving: ["m"], modelsOnDisk: [M], assigned: "m", hosting: true } : o.ownFiles ? { modelsOnDisk: [M] } : {}) }), version: 0 },
    servers: { server: (model: string) => (o.serving && model === "m" ? (ready as never) : undefined) },
    identities: { of: () => undefined },
  });
  const forwarded: { peerId: string; req: ForwardedRequest }[] = [];
  const router = new MeshRouter({
    view,
    store: { list: () => (info ? [info] : []), find: async (name: string) => (info && name === "m" ? info : undefined) },
    needOf: () => 2 * GIB,
    vramBytes: 8 * GIB,
    hosts: o.hosts ?? [],
    forwarder: { forward: async (peerId, req) => (forwarded.push({ peerId, req }), new Response("from the peer")) },
    guest: () => false,
  });
  return { router, forwarded };
}

describe("where a request for m goes", () => {
  test.each<[string, Parameters<typeof routerOf>[0], boolean, Route["to"], string]>([
    ["this node serves it: here", { serving: true, ownFiles: true }, false, "local", ""],
    ["one of the owner's machines hosts it: there", { peers: [hostOf(HOST, "vouched")] }, false, "peer", HOST],
    ["a member of an unanchored mesh hosts it: there", { peers: [hostOf(HOST, "member")] }, false, "peer", HOST],
    ["only a guest claims to serve it: nowhere (a guest serves none of this node's clients)", { peers: [hostOf(GUEST, "guest")] }, false, "unknown", ""],
    ["a guest --hosts names serves it: there", { peers: [hostOf(GUEST, "guest")], hosts: [GUEST] }, false, "peer", GUEST],
    ["its host went silent: unavailable, retry shortly", { peers: [hostOf(HOST, "vouched", SILENT_MS + 5_000)] }, false, "unavailable", ""],
    ["a request a member forwarded here for a model another node hosts is not sent on: it is told where the model moved", { peers: [hostOf(HOST, "vouched")], ownFiles: true }, true, "unavailable", ""],
    ["nobody has it: unknown", {}, false, "unknown", ""],
  ])("%s", async (_, setup, forwarded, to, peerId) => {
    const { router } = routerOf(setup);
    const route = await router.route("m", forwarded);
    expect(route.to, JSON.stringify(route)).toBe(to);
    if (peerId) expect(route).toEqual({ to: "peer", peerId });
  });
});

test("whose word counts, by the standing this node checked itself", () => {
  const { router } = routerOf({ peers: [hostOf(HOST, "vouched"), hostOf(GUEST, "guest")] });
  expect([router.counts(HOST), router.counts(GUEST), router.counts("d".repeat(64))]).toEqual([true, false, false]);
});

test("the load a peer announced is read from its announcement; this node's own from its pool", () => {
  const host = hostOf(HOST, "vouched");
  host.announcement.demand = [{ model: "m", slots: 4, inFlight: 3, queued: 2, waitMs: 100 }];
  const { router } = routerOf({ peers: [host], serving: true, ownFiles: true });
  expect(router.announcedLoad(HOST, "m")).toMatchObject({ slots: 4 });
  expect(router.ownLoad("m")).toMatchObject({ slots: 1, inFlight: 0, queued: 0 });
});

test("a forward goes to the forwarder as it came, and its answer comes back", async () => {
  const { router, forwarded } = routerOf({ peers: [hostOf(HOST, "vouched")] });
  const req = { method: "POST", path: "/v1/completions", headers: { "content-type": "application/json" }, body: new TextEncoder().encode("{}") };
  const res = await router.forward(HOST, req, new AbortController().signal);
  expect(await res.text()).toBe("from the peer");
  expect(forwarded).toEqual([{ peerId: HOST, req }]);
});
