/**
 * What a guest may not do to the owner's machines (issue 42), rule by rule, as tables over the
 * placement rules a node runs on the views whose word counts (`placementViews`): election and
 * hand-over, routes, the puller, content identity, replicas; and the gates outside placement:
 * KV both ways, keep_alive, loads on demand. Each table has the unanchored mesh beside it, whose
 * members count as they always did.
 */
import { describe, expect, test } from "bun:test";
import { createLog } from "../../base/log.ts";
import { catalog, type CatalogModel, type NodeView } from "../../placement/catalog.ts";
import { routeInMesh, type LocalView } from "../../placement/route.ts";
import { replicasToAdd, type ReplicaView } from "../../placement/replicas.ts";
import { counts, mayServeClients, placementViews, withNamedGuests, type Standing } from "../../placement/trust.ts";
import { nodeKv } from "../../node/kv-parts.ts";
import { keepAliveOf } from "../../router/serving/inference.ts";
import { MemberUnloads } from "../../router/serving/keep-alive.ts";
import { streamPair } from "../../harness/stream-pair.ts";
import { readFrame, writeFrame } from "../../streams/wire.ts";
import type { SlotCache } from "../../pool/slot-cache.ts";
import { KEEP_ALIVE_HEADER, FORWARDED_HEADER } from "../../mesh/mesh-headers.ts";

const GB = 2 ** 30;
const M = "alpha";
const node = (nodeId: string, vramGb: number, over: Partial<ReplicaView> = {}): ReplicaView => ({ nodeId, vramBytes: vramGb * GB, modelsOnDisk: [], assigned: undefined, ready: [], idle: [], fetches: true, keepsLayouts: true, hostsOnlyGetters: true, ...over });
const file = (identity: string, over = {}) => ({ name: M, sizeBytes: GB, needBytes: 2 * GB, identity, ...over });
const OWNER_ID = "1".repeat(64);
const OTHER_ID = "2".repeat(64);

// The owner's A serves alpha; the owner's B has nothing; G, a guest, claims everything that would take it.
const A = node("a", 16, { modelsOnDisk: [file(OWNER_ID)], assigned: M, ready: [M], hosting: true, takesReplicas: true });
const B = node("b", 16, { takesReplicas: true });
const G = node("g", 1024, {
  modelsOnDisk: [file(OTHER_ID, { ref: "evil/alpha:Q8_0", source: "https://evil.example/alpha.gguf" })],
  assigned: M,
  ready: [M],
  hosting: true,
  idle: [M],
  fetching: M,
  takesReplicas: true,
  demand: [{ model: M, queued: 50, waitMs: 60_000 }],
});
const guestIs = (id: string): Standing => (id === "g" ? "guest" : "vouched");
const anchoredFrom = (self: string, views: ReplicaView[]) => placementViews(views, self, guestIs);
const unanchored = (self: string, views: ReplicaView[]) => placementViews(views, self, () => "member");
const entryOf = (models: CatalogModel[]) => models.find((m) => m.name === M)!;

describe("whose views go into the catalog", () => {
  test.each<[string, Standing | undefined, boolean]>([
    ["an owner's machine", "vouched", true],
    ["a guest", "guest", false],
    ["a member of an unanchored mesh", "member", true],
    ["a node that is no peer now", undefined, false],
  ])("%s: counts %p", (_, standing, expected) => expect(counts(standing)).toBe(expected));

  test("this node's own view always; a guest's never; unanchored, everyone's", () => {
    expect(anchoredFrom("b", [B, A, G]).map((v) => v.nodeId)).toEqual(["b", "a"]);
    expect(placementViews([G, A], "g", guestIs).map((v) => v.nodeId)).toEqual(["g", "a"]);
    expect(unanchored("b", [B, A, G]).map((v) => v.nodeId)).toEqual(["b", "a", "g"]);
  });
});

describe("election, content, puller: the owner's B reads A and never G", () => {
  const anchored = entryOf(catalog(anchoredFrom("b", [B, A, G])));
  const today = entryOf(catalog(unanchored("b", [B, A, G])));
  test.each<[string, (e: CatalogModel) => unknown, unknown, unknown]>([
    ["the host (G claims a terabyte and a server)", (e) => e.host, "a", "g"],
    ["the servers a request may go to", (e) => e.servers, ["a"], ["g", "a"]],
    ["the content identity", (e) => e.identity ?? null, OWNER_ID, null],
    ["contested", (e) => e.contested ?? false, false, true],
    ["the copy sources", (e) => e.copyFrom, ["a"], []],
    ["the reference a pull takes", (e) => e.ref ?? null, null, "evil/alpha:Q8_0"],
    ["the source a download takes", (e) => e.source ?? null, null, "https://evil.example/alpha.gguf"],
  ])("%s", (_, read, owner, unanchoredToday) => {
    expect(read(anchored)).toEqual(owner);
    expect(read(today)).toEqual(unanchoredToday);
  });

  test("a group nobody has the files of waits for the owner's puller, never the guest that says it fetches", () => {
    const seeded = node("a", 16, { assigned: M, seeds: [{ name: M, sizeBytes: 0, needBytes: 0, ref: "org/alpha:Q8_0" }] });
    const fetchingGuest = node("g", 1024, { assigned: M, fetching: M });
    expect(entryOf(catalog(placementViews([seeded, fetchingGuest], "a", guestIs))).puller).toBe("a");
    expect(entryOf(catalog([seeded, fetchingGuest])).puller).toBe("g");
  });
});

describe("replicas", () => {
  const pressedA = { ...A, demand: [{ model: M, queued: 3, waitMs: 1_000 }] };
  const quietA = { ...A, demand: [{ model: M, queued: 0, waitMs: 0 }] };
  test("a guest's pressed queue is no demand: only the owner's servers' pressure takes a replica", () => {
    const views = (a: ReplicaView) => anchoredFrom("b", [B, a, G]);
    expect(replicasToAdd(views(quietA), catalog(views(quietA)))).toEqual([]);
    expect(replicasToAdd(views(pressedA), catalog(views(pressedA)))).toEqual([{ model: M, node: "b", copyFrom: "a" }]);
  });
  test("a guest with the most memory free is given no replica for the owner's clients (unanchored, it would be)", () => {
    const idleGuest = { ...G, ready: [], assigned: undefined, hosting: false, demand: [] };
    const anchored = anchoredFrom("b", [B, pressedA, idleGuest]);
    expect(replicasToAdd(anchored, catalog(anchored)).map((r) => r.node)).toEqual(["b"]);
    const today = unanchored("b", [B, pressedA, idleGuest]);
    expect(replicasToAdd(today, catalog(today)).map((r) => r.node)).toEqual(["g"]);
  });
});

describe("routes", () => {
  const self: LocalView = { nodeId: "b", model: M, known: false, hasFiles: false, ready: false, needBytes: 2 * GB, vramBytes: 16 * GB };
  const route = (hosts: string[], entry: CatalogModel | undefined, over: Partial<Parameters<typeof routeInMesh>[0]> = {}) =>
    routeInMesh({ entry, self, forwarded: false, choose: (s) => s.at(-1), hosts, silentMs: () => 0, silentLimitMs: () => 3_000, ...over });
  const anchored = entryOf(catalog(anchoredFrom("b", [B, A, G])));
  const guestServing = [{ nodeId: "g", serving: [M] }];

  test.each<[string, string[], string]>([
    ["no --hosts: the owner's server, never the guest", [], "a"],
    ["--hosts names the guest: the operator's word lets it serve", ["g"], "g"],
    ["--hosts names another owner's machine only: no guest either", ["a"], "a"],
  ])("%s", (_, hosts, expected) => {
    const r = route(hosts, withNamedGuests(anchored, M, hosts, guestServing));
    expect(r.to === "peer" && r.peerId).toBe(expected);
  });

  test("a model only a guest serves: unknown here, unless --hosts names the guest", () => {
    expect(route([], withNamedGuests(undefined, M, [], guestServing))).toEqual({ to: "unknown" });
    expect(route(["g"], withNamedGuests(undefined, M, ["g"], guestServing))).toEqual({ to: "peer", peerId: "g" });
  });

  test.each<[string, Standing | undefined, string[], boolean]>([
    ["an owner's machine, no --hosts", "vouched", [], true],
    ["a guest, no --hosts", "guest", [], false],
    ["a guest --hosts names", "guest", ["g"], true],
    ["an owner's machine --hosts leaves out", "vouched", ["x"], false],
    ["unanchored member", "member", [], true],
  ])("mayServeClients: %s", (_, standing, hosts, expected) => expect(mayServeClients(hosts, "b", "g", standing)).toBe(expected));

  test.each<[string, boolean, Partial<LocalView>, CatalogModel | undefined, ReturnType<typeof routeInMesh>["to"]]>([
    ["a guest's request for a model this node runs: answered", true, { ready: true, known: true, hasFiles: true }, undefined, "local"],
    ["a guest's request for a model on this node's disk that it does not run: no load on demand", true, { known: true, hasFiles: true }, undefined, "unavailable"],
    ["...the same from an owner's machine: loaded here", false, { known: true, hasFiles: true }, undefined, "local"],
    ["a guest's request to the model's elected host: answered (the group loads it anyway)", true, { known: true, hasFiles: true }, { ...anchored, host: "b", status: "loading", servedBy: undefined, servers: [] }, "local"],
  ])("%s", (_, fromGuest, over, entry, expected) => {
    expect(routeInMesh({ entry, self: { ...self, ...over }, forwarded: true, hosts: [], silentMs: () => 0, silentLimitMs: () => 3_000, fromGuest }).to).toBe(expected);
  });
});

describe("a guest's own node", () => {
  const noHost = { ...entryOf(catalog([node("c", 1, { assigned: M, fetches: false })])), name: M };
  const guestSelf: LocalView = { nodeId: "g", model: M, known: true, hasFiles: true, ready: false, needBytes: 2 * GB, vramBytes: 256 * GB };
  test.each<[string, boolean, Partial<LocalView>, ReturnType<typeof routeInMesh>["to"]]>([
    ["the owner's machines cannot serve it, the guest has its files and memory: its own local serving", true, {}, "local"],
    ["...without the files: the owner's 503", true, { hasFiles: false }, "unavailable"],
    ["...without the memory: the owner's 503", true, { vramBytes: GB }, "unavailable"],
    ["an owner's machine in the same place: the 503 (it would be in the group if it could run it)", false, {}, "unavailable"],
  ])("%s", (_, selfGuest, over, expected) => {
    expect(noHost.status).toBe("needs-capacity");
    expect(routeInMesh({ entry: noHost, self: { ...guestSelf, ...over }, forwarded: false, hosts: [], silentMs: () => 0, silentLimitMs: () => 3_000, selfGuest }).to).toBe(expected);
  });
});

describe("keep_alive a member carries", () => {
  const call = (from: string | undefined, value = "0") => ({ forwarded: from !== undefined, model: M, keepAlive: undefined, headers: new Headers({ [KEEP_ALIVE_HEADER]: value, ...(from ? { [FORWARDED_HEADER]: from } : {}) }) });
  const routing = (standing: Standing) => ({ counts: () => counts(standing) }) as unknown as Parameters<typeof keepAliveOf>[2];
  test.each<[string, Standing, ReturnType<typeof keepAliveOf>]>([
    ["an owner's machine's 0 unloads", "vouched", { ms: 0, member: true }],
    ["an unanchored member's 0 unloads (as before rosters)", "member", { ms: 0, member: true }],
    ["a guest's 0 does nothing", "guest", undefined],
  ])("%s", (_, standing, expected) => expect(keepAliveOf(call("x"), new MemberUnloads(), routing(standing))).toEqual(expected));
});

describe("KV between nodes", () => {
  const log = createLog("text", () => undefined);
  const IDENTITY = "c".repeat(64);
  const kvOf = (guest: boolean, asked: string[], over: Partial<Parameters<typeof nodeKv>[0]> = {}) =>
    nodeKv({
      build: "b1",
      budgetBytes: 1 << 30,
      slots: {} as SlotCache,
      models: () => [],
      identityOf: () => IDENTITY,
      announcementOf: () => ({ serving: [M], modelsOnDisk: [{ name: M, size: 1, need: 1, identity: IDENTITY }] }),
      counts: () => !guest,
      vouched: () => !guest,
      open: async (member) => void asked.push(member),
      hosts: [],
      log,
      ...over,
    });

  test("a guest is never asked for KV; an owner's machine that serves the model is", async () => {
    const asked: string[] = [];
    expect(await kvOf(true, asked).follow!.fetchFrom("g", "/nowhere", IDENTITY, new Int32Array(200))).toBeUndefined();
    expect(asked).toEqual([]);
    await kvOf(false, asked).follow!.fetchFrom("a", "/nowhere", IDENTITY, new Int32Array(200)).catch(() => undefined);
    expect(asked).toEqual(["a"]);
  });

  // Issue 43: whose word a fetch follows. A member's hint (`x-mesh-kv-from`) named any node; now
  // only this node's own routing record, the roster, or --hosts send it asking.
  test.each<[string, Standing, boolean, string[], boolean]>([
    ["this node routed the conversation there itself (unanchored)", "member", true, [], true],
    ["a member's hint, unanchored: not followed", "member", false, [], false],
    ["a member's hint naming one of the owner's machines: followed", "vouched", false, [], true],
    ["a member's hint naming a node --hosts names: followed", "member", false, ["h"], true],
    ["this node's own record, but --hosts leaves the holder out", "vouched", true, ["x"], false],
    ["a guest, routed or hinted, not named", "guest", true, [], false],
    ["a guest --hosts names, routed there", "guest", true, ["h"], true],
  ])("asked for KV: %s", async (_, standing, routed, hosts, expected) => {
    const asked: string[] = [];
    const kv = kvOf(false, asked, { counts: () => counts(standing), vouched: () => standing === "vouched", hosts });
    await kv.follow!.fetchFrom("h", "/nowhere", IDENTITY, new Int32Array(200), routed).catch(() => undefined);
    expect(asked.length > 0).toBe(expected);
  });

  test("a guest's ask gets a miss, whatever it claims to serve", async () => {
    const [asker, holder] = streamPair();
    const serving = kvOf(true, []).holder.serve("g", holder);
    await writeFrame(asker.send, { identity: IDENTITY, build: "b1", chain: ["0".repeat(32)] });
    expect(await readFrame(asker.recv)).toEqual({ miss: "a guest of this mesh gets no KV from the owner's machines" });
    await serving;
  });
});
