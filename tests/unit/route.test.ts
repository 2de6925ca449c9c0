import { expect, test } from "bun:test";
import type { CatalogModel } from "../../mesh/catalog.ts";
import { routeModel, type LocalView, type Route } from "../../mesh/route.ts";

const entry = (over: Partial<CatalogModel>): CatalogModel => ({
  name: "m",
  source: undefined,
  sizeBytes: 100,
  needBytes: 120,
  nodesOnDisk: [],
  nodesServing: [],
  capacityBytes: 0,
  host: undefined,
  split: false,
  idle: false,
  status: "unloaded",
  ...over,
});
const me = (over: Partial<LocalView> = {}): LocalView => ({ nodeId: "me", known: false, hasFiles: false, ready: false, ...over });

test.each<[string, CatalogModel | undefined, LocalView, boolean, Route["to"] | Route]>([
  ["unknown everywhere: 404", undefined, me(), false, { to: "unknown" }],
  ["not in the catalog but on my disk (alone, no mesh yet): local", undefined, me({ known: true }), false, { to: "local" }],
  ["already up here: local, whoever hosts it", entry({ host: "a", status: "ready" }), me({ ready: true }), false, { to: "local" }],
  ["I am the elected host: local (the pool waits for the load)", entry({ host: "me", status: "loading" }), me({ known: true, hasFiles: true }), false, { to: "local" }],
  ["I am the elected host but the file is still arriving: 503", entry({ host: "me", status: "loading" }), me({ known: true }), false, "unavailable"],
  ["ready on another host: forward there", entry({ host: "a", status: "ready" }), me({ known: true }), false, { to: "peer", peerId: "a" }],
  ["loading on another host: 503 for a few seconds", entry({ host: "a", status: "loading" }), me(), false, "unavailable"],
  ["the group is short of memory: 503 for longer", entry({ host: "a", status: "needs-capacity", capacityBytes: 60 }), me(), false, "unavailable"],
  ["nobody assigned, on my disk: loaded here on demand", entry({ nodesOnDisk: ["a", "me"] }), me({ known: true }), false, { to: "local" }],
  ["nobody assigned, on a peer's disk: that peer loads it on demand", entry({ nodesOnDisk: ["b", "c"] }), me(), false, { to: "peer", peerId: "b" }],
  ["only a source URL: 503 until a node fetches it", entry({ source: "https://example.invalid/m.gguf" }), me(), false, "unavailable"],
  ["forwarded to me and I have it: answered here, never forwarded again", entry({ host: "a", status: "ready" }), me({ known: true }), true, { to: "local" }],
  ["forwarded to me and I do not have it: 404, not a loop", entry({ host: "a", status: "ready" }), me(), true, { to: "unknown" }],
])("%s", (_, e, self, forwarded, expected) => {
  const got = routeModel(e, self, forwarded);
  if (typeof expected === "string") expect(got.to).toBe(expected);
  else expect(got).toEqual(expected);
});

test("503 messages say why and when to retry", () => {
  const short = routeModel(entry({ host: "a", status: "needs-capacity", needBytes: 2 * 2 ** 30, capacityBytes: 2 ** 30 }), me(), false);
  expect(short).toMatchObject({ to: "unavailable", retryAfterS: 30, message: expect.stringContaining("needs 2.00 GiB") });
  const loading = routeModel(entry({ host: "abcdef0123456789", status: "loading" }), me(), false);
  expect(loading).toMatchObject({ to: "unavailable", retryAfterS: 5, message: expect.stringContaining("loading on node abcdef0123") });
});
