/**
 * routeInMesh: the catalog's route, among the servers this node heard from lately and under
 * --hosts, with a clear 503 for a route to a server gone silent.
 */
import { expect, test } from "bun:test";
import type { CatalogModel } from "../../placement/catalog.ts";
import { routeInMesh, type Chooser, type LocalView, type Route } from "../../placement/route.ts";

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
const me = (over: Partial<LocalView> = {}): LocalView => ({ nodeId: "me", model: "m", known: false, hasFiles: false, ready: false, needBytes: 120, vramBytes: 200, ...over });
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
  const got = routeInMesh({ entry: c.e, self: c.self ?? me(), forwarded: c.forwarded ?? false, ...(c.choose ? { choose: c.choose } : {}), hosts: c.hosts ?? [], silentMs, silentLimitMs: LIMIT });
  if (typeof expected === "string") expect(got.to).toBe(expected);
  else expect(got).toEqual(expected);
});

test("the 503 for a silent server says which node, for how long, and to retry", () => {
  const got = routeInMesh({ entry: ready(["gone0123456789"]), self: me(), forwarded: false, hosts: [], silentMs: () => 9_400, silentLimitMs: LIMIT });
  expect(got).toEqual({ to: "unavailable", message: 'the node hosting model "m" (gone012345) has not been heard from for 9 s; retry shortly', retryAfterS: 5 });
});
