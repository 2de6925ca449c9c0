import { describe, expect, test } from "bun:test";
import type { CatalogModel } from "../../placement/catalog.ts";
import { rankFor } from "../../placement/pick-server.ts";
import { routeModel, type Route } from "../../placement/route.ts";
import { modelNotFound, serverGone } from "../../pool/errors.ts";
import { dispatch, failedBeforeAnswer, outstandingOf, retryAvoiding, type Dispatching, type Outcome } from "../../router/serving/dispatch.ts";
import { KV_HINT_MIN_BODY, LastServers } from "../../router/serving/kv-hint.ts";
import { Outstanding } from "../../router/serving/outstanding.ts";
import { type MeshRouting } from "../../node/mesh-routing.ts";
import { RETRIED_FROM_HEADER } from "../../mesh/mesh-headers.ts";

const peer = (peerId: string): Route => ({ to: "peer", peerId });
const local: Route = { to: "local" };
const unavailable: Route = { to: "unavailable", message: "no", retryAfterS: 1 };

test.each<[string, Route | undefined, Outcome, boolean]>([
  ["a peer's 503 (a stale route, its server gone)", peer("a"), { status: 503 }, true],
  ["our own server's 503", local, { status: 503 }, true],
  ["a peer that cannot be reached (serverGone)", peer("a"), { thrown: serverGone("gone") }, true],
  ["our own server gone (serverGone)", local, { thrown: serverGone("gone") }, true],
  ["an answer: never", peer("a"), { status: 200 }, false],
  ["a client error: never", peer("a"), { status: 400 }, false],
  ["a full queue (429): the mesh is busy, not broken", peer("a"), { status: 429 }, false],
  ["a server error (500): it answered", local, { status: 500 }, false],
  ["another failure thrown (model unknown)", local, { thrown: modelNotFound("x") }, false],
  ["something else thrown", peer("a"), { thrown: new Error("x") }, false],
  ["our own route said 503: no server was tried", unavailable, { status: 503 }, false],
  ["no mesh", undefined, { thrown: serverGone("gone") }, false],
])("failedBeforeAnswer: %s", (_, route, outcome, expected) => {
  expect(failedBeforeAnswer(route, outcome)).toBe(expected);
});

const gone: Outcome = { status: 503 };
test.each<[string, Partial<Parameters<typeof retryAvoiding>[0]>, string | undefined]>([
  ["a peer failed, another server: avoid it and try once more", {}, "a"],
  ["our own server failed, a peer serves too: avoid ours", { route: local }, "me"],
  ["forwarded to us: the sender retries", { forwarded: true }, undefined],
  ["the client left", { aborted: true }, undefined],
  ["it answered", { outcome: { status: 200 } }, undefined],
  ["the model's only server", { servers: ["a"] }, undefined],
  ["no server listed any more", { servers: [] }, undefined],
  ["a route that named no server", { route: unavailable }, undefined],
  ["no mesh", { route: undefined, self: undefined }, undefined],
])("retryAvoiding: %s", (_, over, expected) => {
  expect(retryAvoiding({ forwarded: false, aborted: false, route: peer("a"), outcome: gone, self: "me", servers: ["a", "me"], ...over })).toBe(expected);
});

const entry = (servers: string[]): CatalogModel => ({
  name: "m",
  source: undefined,
  sizeBytes: 1,
  needBytes: 1,
  nodesOnDisk: servers,
  copyFrom: servers,
  nodesServing: [servers[0]!],
  capacityBytes: 1,
  host: servers[0],
  servedBy: servers[0],
  servers,
  split: false,
  idle: false,
  status: "ready",
});

/** A node "me" (not serving m itself) in a mesh whose catalog lists `servers` for m; `answer` says how each server answers. */
function mesh(servers: string[], answer: (server: string, call: number) => Response | Error, affinity = true, lastServers?: LastServers) {
  let catalogNow = entry(servers);
  const sent: string[] = [];
  const bodies: { cancelled: boolean }[] = [];
  const routing: MeshRouting = {
    nodeId: () => "me",
    catalog: () => [catalogNow],
    // A request another node sent us is answered here, as routeModel does for a server that is up.
    route: async (model, forwarded, choose) => (forwarded ? { to: "local" } : routeModel(catalogNow, { nodeId: "me", model, known: false, hasFiles: false, ready: false, needBytes: 1, vramBytes: 1 }, forwarded, choose)),
    forward: async () => new Response("unused"),
  };
  const serving: Dispatching = { routing, affinity, outstanding: new Outstanding(), turn: 0, lastServers };
  const movedFrom: (string | undefined)[] = [];
  const send = async (route: Route | undefined, from?: string) => {
    const server = route?.to === "peer" ? route.peerId : route?.to === "local" ? "me" : "?";
    sent.push(server);
    movedFrom.push(from);
    const a = answer(server, sent.length);
    if (a instanceof Error) throw a;
    const seen = { cancelled: false };
    bodies.push(seen);
    const body = new ReadableStream<Uint8Array>({ start: (c) => c.enqueue(new TextEncoder().encode(`${a.status} from ${server}`)), pull: (c) => c.close(), cancel: () => void (seen.cancelled = true) });
    return new Response(a.status === 204 ? null : body, { status: a.status });
  };
  const run = (opts: { forwarded?: boolean; json?: unknown; headers?: Record<string, string>; signal?: AbortSignal; bodyBytes?: number } = {}) =>
    dispatch({ dispatching: serving, model: "m", json: opts.json ?? { messages: [] }, bodyBytes: opts.bodyBytes ?? 0, header: (n) => opts.headers?.[n], forwarded: opts.forwarded ?? false, signal: opts.signal ?? new AbortController().signal, send });
  return { serving, sent, bodies, movedFrom, run, drop: (id: string) => void (catalogNow = entry(catalogNow.servers.filter((s) => s !== id))) };
}

const ok = () => new Response("ok");
const status = (n: number) => new Response(null, { status: n });
// Requests keyed by this user go first to `first`, then `second`.
const USER = { user: "alice" };
const [first, second] = rankFor("u:alice", ["a", "b"].map((nodeId) => ({ nodeId }))).map((s) => s.nodeId) as [string, string];

describe("one retry", () => {
  test.each<[string, (server: string, call: number) => Response | Error, { forwarded?: boolean; servers?: string[] }, { status: number | "thrown"; sent: string[]; retried: boolean }]>([
    ["the chosen server answers: once", () => ok(), {}, { status: 200, sent: [first], retried: false }],
    ["unreachable: once more on the other, which answers", (s) => (s === first ? serverGone("unreachable") : ok()), {}, { status: 200, sent: [first, second], retried: true }],
    ["a 503: once more on the other", (s) => (s === first ? status(503) : ok()), {}, { status: 200, sent: [first, second], retried: true }],
    ["a 429: not retried", (s) => (s === first ? status(429) : ok()), {}, { status: 429, sent: [first], retried: false }],
    ["another error: not retried", (s) => (s === first ? modelNotFound("gone") : ok()), {}, { status: "thrown", sent: [first], retried: false }],
    ["both fail: the second's answer, no third try", () => status(503), {}, { status: 503, sent: [first, second], retried: true }],
    ["both unreachable: the second's error", () => serverGone("unreachable"), {}, { status: "thrown", sent: [first, second], retried: false }],
    ["forwarded to us: the sender retries, not us", (s) => (s === "me" ? status(503) : ok()), { forwarded: true }, { status: 503, sent: ["me"], retried: false }],
    ["no other server: the error as today", () => status(503), { servers: [first] }, { status: 503, sent: [first], retried: false }],
  ])("%s", async (_, answer, opts, expected) => {
    const m = mesh(opts.servers ?? ["a", "b", "me"].slice(0, opts.forwarded ? 3 : 2), answer);
    const got = await m.run({ json: USER, ...(opts.forwarded ? { forwarded: true } : {}) }).then(
      (res) => res,
      () => "thrown" as const,
    );
    expect(got === "thrown" ? got : got.status).toBe(expected.status);
    expect(m.sent).toEqual(expected.sent);
    if (got !== "thrown") expect(got.headers.get(RETRIED_FROM_HEADER)).toBe(expected.retried ? first : null);
    // A failed answer's body is dropped unread; the client never sees it.
    if (expected.retried && m.bodies.length === 2) expect(m.bodies[0]!.cancelled).toBe(true);
    expect(outstandingOf(m.serving).size).toBe(got === "thrown" ? 0 : 1);
    if (got !== "thrown") await got.text();
    expect(outstandingOf(m.serving).size).toBe(0);
  });

  test("a client that left is not sent again", async () => {
    const abort = new AbortController();
    const m = mesh(["a", "b"], () => (abort.abort(), serverGone("unreachable")));
    await expect(m.run({ json: USER, signal: abort.signal })).rejects.toThrow("unreachable");
    expect(m.sent).toEqual([first]);
  });

  test("the other server is left out of the choice (silent): no second try on the failed one, its answer stands", async () => {
    // The failed server is the one the model is served by, where a route falls back to.
    const m = mesh([first, second], (s) => (s === first ? status(503) : ok()));
    const routing = m.serving.routing!;
    const route = routing.route.bind(routing);
    // The catalog still lists both, but the node's liveness filter leaves only the failed one to choose from.
    routing.route = (model, forwarded, choose) => route(model, forwarded, choose && ((servers) => choose(servers.filter((id) => id !== second))));
    const res = await m.run({ json: USER });
    expect([res.status, m.sent, res.headers.get(RETRIED_FROM_HEADER)]).toEqual([503, [first], null]);
  });

  test("the failed server left the catalog meanwhile: the other answers", async () => {
    const m = mesh(["a", "b"], (s) => (s === first ? (m.drop(first), serverGone("gone")) : ok()));
    const res = await m.run({ json: USER });
    expect([res.status, m.sent]).toEqual([200, [first, second]]);
  });
});

describe("spreading", () => {
  test("one key, one server; many keys, both servers", async () => {
    const m = mesh(["a", "b"], () => ok());
    for (let i = 0; i < 3; i++) await (await m.run({ json: USER })).text();
    expect(m.sent).toEqual([first, first, first]);
    for (let i = 0; i < 20; i++) await (await m.run({ json: { user: `user-${i}` } })).text();
    expect(new Set(m.sent.slice(3))).toEqual(new Set(["a", "b"]));
  });

  test("a session header outranks the user", async () => {
    const m = mesh(["a", "b"], () => ok());
    const bySession = rankFor("s:chat-9", ["a", "b"].map((nodeId) => ({ nodeId })))[0]!.nodeId;
    for (let i = 0; i < 3; i++) await (await m.run({ json: { user: `user-${i}` }, headers: { "x-session-id": "chat-9" } })).text();
    expect(m.sent).toEqual([bySession, bySession, bySession]);
  });

  test("requests in flight move the next ones: least outstanding", async () => {
    const m = mesh(["a", "b"], () => ok(), false);
    const held = [await m.run(), await m.run()];
    // The first still in flight (its body unread), the second goes to the other server.
    expect(new Set(m.sent)).toEqual(new Set(["a", "b"]));
    await Promise.all(held.map((r) => r.text()));
    expect(outstandingOf(m.serving).size).toBe(0);
  });

  test("--affinity off: one user's requests take turns over idle servers", async () => {
    const m = mesh(["a", "b"], () => ok(), false);
    for (let i = 0; i < 4; i++) await (await m.run({ json: USER })).text();
    expect(new Set(m.sent)).toEqual(new Set(["a", "b"]));
  });
});

describe("a moved conversation names the server that answered it last (its KV cache is there)", () => {
  const long = { json: USER, bodyBytes: KV_HINT_MIN_BODY };
  test("the same server each turn: nothing moved", async () => {
    const m = mesh(["a", "b"], () => ok(), true, new LastServers());
    for (let i = 0; i < 3; i++) await (await m.run(long)).text();
    expect(m.movedFrom).toEqual([undefined, undefined, undefined]);
  });

  test("its server leaves the model: the next turn goes to the other, naming the first", async () => {
    const m = mesh(["a", "b"], () => ok(), true, new LastServers());
    await (await m.run(long)).text();
    m.drop(first);
    await (await m.run(long)).text();
    await (await m.run(long)).text();
    expect(m.sent).toEqual([first, second, second]);
    expect(m.movedFrom).toEqual([undefined, first, undefined]);
  });

  test.each<[string, Partial<Parameters<ReturnType<typeof mesh>["run"]>[0]>, LastServers | undefined]>([
    ["a short prompt (read again faster than fetched)", { bodyBytes: KV_HINT_MIN_BODY - 1 }, new LastServers()],
    ["no cache to follow on this node (none remembered)", {}, undefined],
    ["a request without a key (an embedding's input)", { json: {} }, new LastServers()],
  ])("%s: never named", async (_, over, lastServers) => {
    const m = mesh(["a", "b"], () => ok(), true, lastServers);
    await (await m.run({ ...long, ...over })).text();
    m.drop(first);
    await (await m.run({ ...long, ...over })).text();
    expect(m.movedFrom).toEqual([undefined, undefined]);
  });

  test("another conversation of the same model is not moved by it", async () => {
    const m = mesh(["a", "b"], () => ok(), true, new LastServers());
    await (await m.run(long)).text();
    await (await m.run({ json: { user: "bob" }, bodyBytes: KV_HINT_MIN_BODY })).text();
    expect(m.movedFrom).toEqual([undefined, undefined]);
  });
});
