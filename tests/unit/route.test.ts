import { expect, test } from "bun:test";
import type { CatalogModel } from "../../placement/catalog.ts";
import { hostAllowed, routeInMesh, routeModel, withinHosts, type Chooser, type LocalView, type Route } from "../../placement/route.ts";

const entry = (over: Partial<CatalogModel>): CatalogModel => ({
  name: "m",
  source: undefined,
  sizeBytes: 100,
  needBytes: 120,
  nodesOnDisk: [],
  copyFrom: [],
  nodesServing: [],
  capacityBytes: 0,
  host: undefined,
  servedBy: undefined,
  servers: [],
  split: false,
  idle: false,
  status: "unloaded",
  ...over,
});
// The model "m" needs 120 bytes; this node offers 200 unless a case says otherwise.
const me = (over: Partial<LocalView> = {}): LocalView => ({ nodeId: "me", model: "m", known: false, hasFiles: false, ready: false, needBytes: 120, vramBytes: 200, ...over });
const small = { vramBytes: 100 };

test.each<[string, CatalogModel | undefined, LocalView, boolean, Route["to"] | Route]>([
  ["unknown everywhere: 404", undefined, me(), false, { to: "unknown" }],
  ["not in the catalog but on my disk (alone, no mesh yet): local", undefined, me({ known: true }), false, { to: "local" }],
  ["already up here: local, whoever hosts it", entry({ host: "a", servedBy: "a", status: "ready" }), me({ ready: true }), false, { to: "local" }],
  ["I am the elected host: local (the pool waits for the load)", entry({ host: "me", status: "loading" }), me({ known: true, hasFiles: true }), false, { to: "local" }],
  ["I am the elected host but the file is still arriving: 503", entry({ host: "me", status: "loading" }), me({ known: true }), false, "unavailable"],
  ["ready on another host: forward there", entry({ host: "a", servedBy: "a", status: "ready" }), me({ known: true }), false, { to: "peer", peerId: "a" }],
  ["a new host still loading: to the member that still serves it", entry({ host: "a", servedBy: "b", status: "ready" }), me(), false, { to: "peer", peerId: "b" }],
  ["loading on another host that has the file: forwarded, it waits for the load there", entry({ host: "a", status: "loading", nodesOnDisk: ["a"] }), me(), false, { to: "peer", peerId: "a" }],
  ["loading on another host still fetching the file: 503", entry({ host: "a", status: "loading" }), me(), false, "unavailable"],
  ["the group is short of memory: 503 for longer", entry({ host: "a", status: "needs-capacity", capacityBytes: 60 }), me(), false, "unavailable"],
  ["nobody assigned, on my disk: loaded here on demand", entry({ nodesOnDisk: ["a", "me"] }), me({ known: true, hasFiles: true }), false, { to: "local" }],
  ["nobody assigned, only my registry names it: 503 until its file is somewhere", entry({ source: "https://example.invalid/m.gguf" }), me({ known: true }), false, "unavailable"],
  ["nobody assigned, on a peer's disk: that peer loads it on demand", entry({ nodesOnDisk: ["b", "c"] }), me(), false, { to: "peer", peerId: "b" }],
  ["only a source URL: 503 until a node fetches it", entry({ source: "https://example.invalid/m.gguf" }), me(), false, "unavailable"],
  ["the host's own API for a model short of memory: 503, no load", entry({ host: "me", status: "needs-capacity" }), me({ known: true, hasFiles: true }), false, "unavailable"],
  ["forwarded to me and I serve it: answered here, never forwarded again", entry({ host: "a", servedBy: "a", status: "ready" }), me({ known: true, ready: true }), true, { to: "local" }],
  ["forwarded to me and I do not have it: 404, not a loop", entry({ status: "unloaded" }), me(), true, { to: "unknown" }],
  ["forwarded to me as its host, but the mesh moved it: 503, no load outside its group", entry({ host: "a", servedBy: "a", status: "ready" }), me({ known: true, hasFiles: true }), true, "unavailable"],
  ["forwarded to me and I am its host: answered here", entry({ host: "me", status: "loading", nodesOnDisk: ["me"] }), me({ known: true, hasFiles: true }), true, { to: "local" }],
  // A node never loads a model alone beyond the memory it offers.
  ["nobody assigned, on my disk, but beyond my memory: 503, no load", entry({ nodesOnDisk: ["me"] }), me({ known: true, hasFiles: true, ...small }), false, "unavailable"],
  ["not in the catalog, on my disk, beyond my memory: 503", undefined, me({ known: true, hasFiles: true, ...small }), false, "unavailable"],
  ["forwarded to me as a holder, beyond my memory: 503", entry({ nodesOnDisk: ["me"] }), me({ known: true, hasFiles: true, ...small }), true, "unavailable"],
  ["forwarded to me as the host of its split, beyond my memory alone: answered here (over the group)", entry({ host: "me", status: "loading", split: true }), me({ known: true, hasFiles: true, ...small }), true, { to: "local" }],
  ["the elected host of a split, beyond my memory alone: local (the pool loads it over the group)", entry({ host: "me", status: "loading", split: true }), me({ known: true, hasFiles: true, ...small }), false, { to: "local" }],
  ["its host still fetches it and I have the files: answered here meanwhile", entry({ host: "a", status: "loading", nodesOnDisk: ["me"] }), me({ known: true, hasFiles: true }), false, { to: "local" }],
  ["its host still fetches it, I have the files but not the memory: the 503 says why", entry({ host: "a", status: "loading", nodesOnDisk: ["me"] }), me({ known: true, hasFiles: true, ...small }), false, "unavailable"],
  ["already up here, whatever my memory: local", entry({ host: "me", servedBy: "me", status: "ready" }), me({ ready: true, ...small }), false, { to: "local" }],
])("%s", (_, e, self, forwarded, expected) => {
  const got = routeModel(e, self, forwarded);
  if (typeof expected === "string") expect(got.to).toBe(expected);
  else expect(got).toEqual(expected);
});

test("503 messages say why and when to retry", () => {
  const beyond = routeModel(entry({ nodesOnDisk: ["me"] }), me({ known: true, hasFiles: true, needBytes: 2 * 2 ** 30, vramBytes: 2 ** 30 }), false);
  expect(beyond).toMatchObject({ to: "unavailable", retryAfterS: 30, message: expect.stringContaining('model "m" needs 2.00 GiB and this node offers 1.00 GiB') });
  const short = routeModel(entry({ host: "a", status: "needs-capacity", needBytes: 2 * 2 ** 30, capacityBytes: 2 ** 30 }), me(), false);
  expect(short).toMatchObject({ to: "unavailable", retryAfterS: 30, message: expect.stringContaining("needs 2.00 GiB") });
  const hostless = routeModel(entry({ host: undefined, status: "needs-capacity", nodesServing: ["b"] }), me(), false);
  expect(hostless).toMatchObject({ to: "unavailable", retryAfterS: 30, message: expect.stringContaining("has no host: the nodes assigned to it neither have its files nor fetch them") });
  const fetching = routeModel(entry({ host: "abcdef0123456789", status: "loading" }), me(), false);
  expect(fetching).toMatchObject({ to: "unavailable", retryAfterS: 10, message: expect.stringContaining("being fetched by node abcdef0123") });
});

// With a chooser (the router's: affinity, least outstanding), a model served by several nodes goes to the one it picks.
const pickLast = (servers: readonly string[]) => servers[servers.length - 1];
const pickNone = () => undefined;
const replicated = entry({ host: "a", servedBy: "a", servers: ["a", "b", "me"], status: "ready" });
test.each<[string, CatalogModel | undefined, LocalView, boolean, (s: readonly string[]) => string | undefined, Route]>([
  ["ready on several servers: the chosen peer", entry({ host: "a", servedBy: "a", servers: ["a", "b"], status: "ready" }), me(), false, pickLast, { to: "peer", peerId: "b" }],
  ["ready on several servers, I am one: the chosen peer, though mine answers", replicated, me({ ready: true }), false, (s) => s[1], { to: "peer", peerId: "b" }],
  ["ready on several servers, I am one and chosen: local", replicated, me({ ready: true }), false, pickLast, { to: "local" }],
  ["mine answers but the catalog does not list me yet: I am among the choices", entry({ host: "a", servedBy: "a", servers: ["a"], status: "ready" }), me({ ready: true }), false, (s) => (s.includes("me") ? "me" : undefined), { to: "local" }],
  ["forwarded to me and mine answers: local, whatever the chooser says", replicated, me({ ready: true }), true, (s) => s[0], { to: "local" }],
  ["the chooser picks none (all avoided): its usual server", entry({ host: "a", servedBy: "a", servers: ["a", "b"], status: "ready" }), me(), false, pickNone, { to: "peer", peerId: "a" }],
  ["the chooser picks none and mine answers: local", replicated, me({ ready: true }), false, pickNone, { to: "local" }],
  ["loading: the host, no choice to make", entry({ host: "a", status: "loading", nodesOnDisk: ["a"] }), me(), false, pickLast, { to: "peer", peerId: "a" }],
  ["loading, a replica answers meanwhile: the replica", entry({ host: "a", status: "loading", nodesOnDisk: ["a", "c"], servers: ["c"] }), me(), false, pickLast, { to: "peer", peerId: "c" }],
  ["failed on its host, a replica answers: the replica", entry({ host: "a", status: "failed", servers: ["c"], failure: { error: "x", retryInS: 5 } }), me(), false, pickNone, { to: "peer", peerId: "c" }],
  ["loading, forwarded to me, a replica elsewhere: not sent on (the sender chose)", entry({ host: "me", status: "loading", nodesOnDisk: ["me"], servers: ["c"] }), me({ known: true, hasFiles: true }), true, pickLast, { to: "local" }],
])("chooser: %s", (_, e, self, forwarded, choose, expected) => {
  expect(routeModel(e, self, forwarded, choose)).toEqual(expected);
});

// --hosts: the operator names the nodes that may serve this node's clients ("a" here, and this node).
const onlyA = (id: string) => hostAllowed(["a"], "me", id);
test.each<[string, Route, CatalogModel | undefined, LocalView, Route["to"] | Route]>([
  ["a route to a named node stands", { to: "peer", peerId: "a" }, entry({ servers: ["a"] }), me(), { to: "peer", peerId: "a" }],
  ["local stands", { to: "local" }, undefined, me({ ready: true }), { to: "local" }],
  ["to a node not named, another server that is: there", { to: "peer", peerId: "rogue" }, entry({ servers: ["rogue", "a"] }), me(), { to: "peer", peerId: "a" }],
  ["to a node not named, none other, my own copy fits: served here", { to: "peer", peerId: "rogue" }, entry({ servers: ["rogue"] }), me({ known: true, hasFiles: true }), { to: "local" }],
  ["to a node not named, my copy beyond my memory: 503", { to: "peer", peerId: "rogue" }, entry({ servers: ["rogue"] }), me({ known: true, hasFiles: true, ...small }), "unavailable"],
  ["to a node not named, no copy here: 503", { to: "peer", peerId: "rogue" }, entry({ servers: ["rogue"] }), me({ known: true }), "unavailable"],
  ["a 503 stands", { to: "unavailable", message: "x", retryAfterS: 1 }, undefined, me(), "unavailable"],
])("--hosts: %s", (_, route, e, self, expected) => {
  const got = withinHosts(route, e, self, onlyA);
  if (typeof expected === "string") expect(got.to).toBe(expected);
  else expect(got).toEqual(expected);
});

test.each<[string, string[], string, boolean]>([
  ["no --hosts: any member", [], "bbbbbbbbbbbb", true],
  ["this node always", ["self"], "me", true],
  ["self: no other node", ["self"], "bbbbbbbbbbbb", false],
  ["a named node", ["a".repeat(64)], "a".repeat(64), true],
  ["a node whose id begins as a named one's (ground to match)", ["a".repeat(64)], `${"a".repeat(63)}b`, false],
  ["another node", ["a".repeat(64)], "b".repeat(64), false],
])("hostAllowed: %s", (_, hosts, id, ok) => {
  expect(hostAllowed(hosts, "me", id)).toBe(ok);
});

test("the 503 of --hosts says which node and why", () => {
  const got = withinHosts({ to: "peer", peerId: "rogue0123456789" }, entry({ servers: ["rogue0123456789"] }), me({ known: true }), onlyA);
  expect(got).toMatchObject({ to: "unavailable", retryAfterS: 30, message: 'model "m" is served by node rogue01234, which --hosts does not name, and this node cannot run it itself (it has no copy)' });
});

// routeInMesh: the catalog's route, among the servers this node heard from lately and under
// --hosts, with a clear 503 for a route to a server gone silent.
const LIMIT = 3_000;
/** Node "gone" was last heard from 9 s ago; every other node just now. */
const silentMs = (id: string) => (id === "gone" ? 9_000 : 0);
const first: Chooser = (servers) => servers[0];
const ready = (servers: string[]) => entry({ host: servers[0], servedBy: servers[0], servers, status: "ready" });

test.each<[string, { e: CatalogModel | undefined; self?: LocalView; forwarded?: boolean; choose?: Chooser; hosts?: string[] }, Route["to"] | Route]>([
  ["ready on a live peer: there", { e: ready(["a"]) }, { to: "peer", peerId: "a" }],
  ["ready on a peer gone silent, no other: 503 now", { e: ready(["gone"]) }, "unavailable"],
  ["several servers, the first gone silent: the chooser sees only the live one", { e: ready(["gone", "b"]), choose: first }, { to: "peer", peerId: "b" }],
  ["several servers, all gone silent: the usual server is silent, 503", { e: ready(["gone"]), choose: first }, "unavailable"],
  ["mine answers: local, whoever is silent", { e: ready(["gone"]), self: me({ ready: true }) }, { to: "local" }],
  ["--hosts names a, the chooser sees only a", { e: ready(["b", "a"]), choose: first, hosts: ["a"] }, { to: "peer", peerId: "a" }],
  ["--hosts names a, the route goes to b: a instead", { e: ready(["b", "a"]), hosts: ["a"] }, { to: "peer", peerId: "a" }],
  ["unknown everywhere: 404", { e: undefined }, { to: "unknown" }],
])("%s", (_, c, expected) => {
  const got = routeInMesh({ entry: c.e, self: c.self ?? me(), forwarded: c.forwarded ?? false, ...(c.choose ? { choose: c.choose } : {}), hosts: c.hosts ?? [], silentMs, silentLimitMs: () => LIMIT });
  if (typeof expected === "string") expect(got.to).toBe(expected);
  else expect(got).toEqual(expected);
});

test("the 503 for a silent server says which node, for how long, and to retry", () => {
  const got = routeInMesh({ entry: ready(["gone0123456789"]), self: me(), forwarded: false, hosts: [], silentMs: () => 9_400, silentLimitMs: () => LIMIT });
  expect(got).toEqual({ to: "unavailable", message: 'the node hosting model "m" (gone012345) has not been heard from for 9 s; retry shortly', retryAfterS: 5 });
});
