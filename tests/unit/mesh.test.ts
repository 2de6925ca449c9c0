import { describe, expect, test } from "bun:test";
import { AnnouncementSource } from "../../mesh/announcement.ts";
import { authMac, newNonce, verifyMac, type AuthContext } from "../../mesh/auth.ts";
import { decodeJoinToken, encodeJoinToken, type JoinToken } from "../../mesh/join-token.ts";
import { bindAddresses, boundPorts } from "../../node/mesh-node.ts";
import { closedAsDuplicate, resetByPeer } from "../../mesh/replacements.ts";
import { dueRedials, joinBackoffMs, keepWhich, membersToDial } from "../../mesh/membership-rules.ts";
import { AnnouncementSchema, ControlMessageSchema } from "../../mesh/messages.ts";
import { decodePayload, encodeFrame, MAX_CONTROL_MESSAGE, WireError } from "../../streams/wire.ts";
import { fakeAnnouncement } from "../../harness/rogue-peer.ts";
import { formatStatus } from "../../commands/status.ts";
import { nodeIdOf, nodeSigner, signedBy } from "../../mesh/transport.ts";
import { decodeDirectHello, directMac, directStatement, encodeDirectHello, verifyDirectMac } from "../../tunnel/direct-auth.ts";
import { directHost, directTarget } from "../../tunnel/direct.ts";

describe("join tokens", () => {
  const token: JoinToken = { addr: { nodeId: "abc123", addresses: ["127.0.0.1:4433", "[::1]:4434"] }, secret: new Uint8Array(32).fill(1) };
  test("round-trip, URL-safe", () => {
    const text = encodeJoinToken(token);
    expect(text).toMatch(/^mesh1[A-Za-z0-9_-]+$/);
    expect(decodeJoinToken(text)).toEqual(token);
    const withRelay = { ...token, addr: { ...token.addr, relayUrl: "https://relay.example/" } };
    expect(decodeJoinToken(encodeJoinToken(withRelay))).toEqual(withRelay);
    expect(decodeJoinToken(`  ${text}\n`)).toEqual(token);
  });
  test("a token names its iroh line only when it is not the default, so iroh035 tokens are what they always were", () => {
    const iroh1 = { ...token, line: "iroh1" as const };
    expect(decodeJoinToken(encodeJoinToken(iroh1))).toEqual(iroh1);
    const ownRelays = { ...iroh1, relays: ["https://relay.example.org", "https://relay2.example.org"] };
    expect(decodeJoinToken(encodeJoinToken(ownRelays))).toEqual(ownRelays);
    expect(encodeJoinToken({ ...token, line: "iroh035" })).toBe(encodeJoinToken(token));
    expect(decodeJoinToken(encodeJoinToken({ ...token, line: "iroh035" }))).toEqual(token);
  });
  const b64 = (o: unknown) => `mesh1${Buffer.from(JSON.stringify(o)).toString("base64url")}`;
  test.each([
    ["", "should start with"],
    ["mesh2abc", "should start with"],
    ["mesh1%%%", "does not decode"],
    [b64({ n: "x", a: ["1.2.3.4:1"] }), "fields are wrong"],
    [b64({ n: "x", a: ["1.2.3.4:1"], s: Buffer.alloc(16).toString("base64url") }), "wrong length"],
    [b64({ n: "x", a: [], s: Buffer.alloc(32).toString("base64url") }), "no address"],
    [b64({ n: "x", a: ["1.2.3.4:1"], s: Buffer.alloc(32).toString("base64url"), t: "iroh2" }), "fields are wrong"],
    [b64({ n: "x", a: ["1.2.3.4:1"], s: Buffer.alloc(32).toString("base64url"), t: "iroh1", rs: ["ftp://relay.example.org"] }), "fields are wrong"],
    [b64({ n: "x", a: ["1.2.3.4:1"], s: Buffer.alloc(32).toString("base64url"), rs: ["https://relay.example.org"] }), "relays are for a mesh on iroh1"],
  ])("%p is refused: %s", (text, why) => {
    expect(() => decodeJoinToken(text)).toThrow(why);
  });
});

describe("authentication", () => {
  const ctx: AuthContext = { secret: new Uint8Array(32).fill(3), dialerId: "d", acceptorId: "a", dialerNonce: newNonce(), acceptorNonce: newNonce() };
  test("a proof verifies under the same secret, ids, nonces and role", () => {
    expect(verifyMac("dialer", ctx, authMac("dialer", ctx))).toBe(true);
    expect(verifyMac("acceptor", ctx, authMac("acceptor", ctx))).toBe(true);
  });
  test.each([
    ["another secret", { secret: new Uint8Array(32).fill(4) }],
    ["swapped ids", { dialerId: "a", acceptorId: "d" }],
    ["another connection's nonce", { acceptorNonce: newNonce() }],
  ] as const)("fails with %s", (_, change) => {
    expect(verifyMac("dialer", { ...ctx, ...change }, authMac("dialer", ctx))).toBe(false);
  });
  test("a proof reflected back in the other role fails", () => {
    expect(verifyMac("acceptor", ctx, authMac("dialer", ctx))).toBe(false);
  });
  test("a truncated proof fails", () => {
    expect(verifyMac("dialer", ctx, authMac("dialer", ctx).subarray(0, 16))).toBe(false);
  });
});

describe("keepWhich: both ends keep the same connection", () => {
  const cases: [string, string, string, { dialer: string; instance: string }, { dialer: string; instance: string }, "existing" | "incoming"][] = [
    ["simultaneous dials: the smaller id's dial wins (seen from the smaller)", "a", "b", { dialer: "a", instance: "1" }, { dialer: "b", instance: "1" }, "existing"],
    ["simultaneous dials: the smaller id's dial wins (seen from the larger)", "b", "a", { dialer: "b", instance: "1" }, { dialer: "a", instance: "1" }, "incoming"],
    ["a restarted peer's new connection wins", "a", "b", { dialer: "a", instance: "1" }, { dialer: "b", instance: "2" }, "incoming"],
    ["a second dial by the same side wins", "a", "b", { dialer: "b", instance: "1" }, { dialer: "b", instance: "1" }, "incoming"],
  ];
  test.each(cases)("%s", (_, self, peer, existing, incoming, expected) => expect(keepWhich(self, peer, existing, incoming)).toBe(expected));
});

test("membersToDial skips ourselves, the known and duplicates", () => {
  const m = (id: string) => ({ nodeId: id, addresses: [`127.0.0.1:${id.length}`] });
  expect(membersToDial([m("self"), m("a"), m("b"), m("a"), m("c")], "self", new Set(["b"]))).toEqual([m("a"), m("c")]);
});

test("join backoff", () => {
  expect([0, 1, 2, 5, 20].map(joinBackoffMs)).toEqual([500, 1000, 2000, 16_000, 30_000]);
});

test("dueRedials: lost members not connected or being dialed, once their pause is over (a healed partition finds itself again)", () => {
  const remembered = ["a", "b", "c", "d", "e"];
  const busy = new Set(["a", "b"]);
  const nextAt = new Map([["c", 5000], ["d", 20_000]]);
  expect(dueRedials(remembered, busy, nextAt, 10_000)).toEqual(["c", "e"]);
  expect(dueRedials(remembered, new Set(remembered), new Map(), 10_000)).toEqual([]);
});

describe("control frames", () => {
  test("a frame is a big-endian length and JSON", () => {
    const frame = encodeFrame({ a: 1 });
    expect(new DataView(frame.buffer).getUint32(0)).toBe(frame.length - 4);
    expect(decodePayload(frame.subarray(4))).toEqual({ a: 1 });
  });
  test("over the cap is refused when writing", () => {
    expect(() => encodeFrame({ big: "x".repeat(MAX_CONTROL_MESSAGE) })).toThrow(WireError);
  });
  test.each([
    [Uint8Array.from([0xff, 0xfe, 0x00]), "not UTF-8"],
    [new TextEncoder().encode("{nope"), "not JSON"],
  ])("junk payload %#", (payload, why) => expect(() => decodePayload(payload)).toThrow(why));
});

describe("control messages", () => {
  const ann = fakeAnnouncement("n1");
  test("unknown fields are dropped, known ones kept", () => {
    const parsed = ControlMessageSchema.parse({ v: 1, type: "announce", announcement: { ...ann, future: true }, extra: 1 });
    expect(parsed).toEqual({ v: 1, type: "announce", announcement: ann });
  });
  test.each([
    [{ v: 2, type: "leave" }],
    [{ v: 1, type: "shout" }],
    [{ v: 1, type: "announce", announcement: { ...ann, vramBytes: -1 } }],
    [{ v: 1, type: "announce", announcement: { ...ann, role: "boss" } }],
    [{ v: 1, type: "members", members: [{ nodeId: "" , addresses: [] }] }],
    [{ v: 1, type: "hello", announcement: ann }],
  ])("wrong shape %# is refused", (msg) => expect(ControlMessageSchema.safeParse(msg).success).toBe(false));
});

test("an announcement's seq moves only when its content changes", () => {
  let serving: string[] = [];
  const { instance, ...rest } = fakeAnnouncement("n1");
  const { seq: _seq, ...content } = rest;
  const source = new AnnouncementSource(() => ({ ...content, serving }));
  const first = source.current();
  expect([first.announcement.seq, first.changed]).toEqual([1, true]);
  expect(source.current()).toMatchObject({ changed: false, announcement: { seq: 1 } });
  serving = ["m"];
  expect(source.current()).toMatchObject({ changed: true, announcement: { seq: 2, serving: ["m"], instance: source.instance } });
  expect(instance).not.toBe(source.instance);
});

describe("QUIC bind addresses", () => {
  const cases: [string, Parameters<typeof bindAddresses>[0], Parameters<typeof bindAddresses>[1], ReturnType<typeof bindAddresses>][] = [
    ["default, first start: iroh's defaults", undefined, {}, {}],
    ["default, restart: the old ports", undefined, { v4: 4000, v6: 4001 }, { ipv4Addr: "0.0.0.0:4000", ipv6Addr: "[::]:4001" }],
    ["loopback pins IPv6 to loopback", { host: "127.0.0.1", port: 0 }, {}, { ipv4Addr: "127.0.0.1:0", ipv6Addr: "[::1]:0" }],
    ["loopback restart reuses both ports", { host: "127.0.0.1", port: 0 }, { v4: 5000, v6: 5001 }, { ipv4Addr: "127.0.0.1:5000", ipv6Addr: "[::1]:5001" }],
    ["an explicit port wins", { host: "10.0.0.2", port: 4433 }, { v4: 5000 }, { ipv4Addr: "10.0.0.2:4433" }],
    ["an IPv6 host", { host: "::1", port: 0 }, { v6: 7000 }, { ipv6Addr: "[::1]:7000" }],
  ];
  test.each(cases)("%s", (_, bind, remembered, expected) => expect(bindAddresses(bind, remembered)).toEqual(expected));
  test("bound ports from addresses", () => {
    expect(boundPorts(["127.0.0.1:4000", "[::1]:4001"])).toEqual({ v4: 4000, v6: 4001 });
    expect(boundPorts([])).toEqual({});
  });
});

test("mesh status prints this node's line and relay, and one line per peer with its own", () => {
  const peer = { shortId: "p1", addresses: ["127.0.0.1:1"], rttMs: 2, role: "host" as const, serving: ["qwen"], vramBytes: 2 ** 33, ramBytes: 0, apiPort: 1, meshVersion: "0.1.0", llamaBuild: "x", lastSeenMsAgo: 5, watched: true, directPort: undefined, standing: "member" as const };
  const text = formatStatus("http://127.0.0.1:9337", {
    version: "0.1.0",
    state: "running",
    nodeId: "abcdef0123456789",
    line: "iroh1",
    relay: "https://euc1-1.relay.n0.iroh-canary.iroh.link./",
    peers: [
      { ...peer, nodeId: "p1", line: "iroh1", relayUrl: "https://relay.example.org/" },
      { ...peer, nodeId: "p2", shortId: "p2", line: "iroh1", relayUrl: undefined },
    ],
  }, "mesh1xyz");
  expect(text).toContain("line     iroh1  relay https://euc1-1.relay.n0.iroh-canary.iroh.link./");
  expect(text).not.toContain("retired");
  expect(text).toContain("token    mesh1xyz");
  expect(text).toContain("peers    2");
  expect(text).toContain("  p1  iroh1  127.0.0.1:1  relay https://relay.example.org/  rtt 2 ms  host  serving qwen  vram 8.0 GiB");
  expect(text).toContain("  p2  iroh1  127.0.0.1:1  relay none  rtt 2 ms");
  // What a member announced reaches the terminal without the escapes that would drive it.
  const rogue = formatStatus("http://127.0.0.1:9337", { version: "0.1.0", state: "running", nodeId: "x", peers: [{ ...peer, nodeId: "p3", line: "iroh1", addresses: ["1.2.3.4:1\x1b[2J"], relayUrl: "https://r/\x1b]0;owned\x07" }] }, undefined);
  expect(rogue).not.toMatch(/[\x00-\x09\x0b-\x1f\x7f]/);
  expect(rogue).toContain("1.2.3.4:1?[2J  relay https://r/?]0;owned?");
  expect(text).not.toContain("models");
});

test("mesh status on the 0.35 line says its relays are being retired and where to read how to move", () => {
  const text = formatStatus("http://127.0.0.1:9337", { version: "0.1.0", state: "running", nodeId: "abcdef0123456789", line: "iroh035", relay: "disabled", peers: [] }, undefined);
  expect(text).toContain('line     iroh035  relay disabled  (0.35 relays are being retired: see "Moving a mesh to iroh 1.x" in the README)');
});

test("mesh status prints the catalog, the assignment and a fetch under way", () => {
  const text = formatStatus("http://127.0.0.1:9337", {
    version: "0.1.0",
    state: "running",
    nodeId: "abcdef0123456789",
    peers: [],
    models: {
      assigned: "big",
      fetching: { model: "big", bytes: 2 ** 29, total: 2 ** 30, from: "p1" },
      catalog: [
        { name: "big", source: undefined, sizeBytes: 2 ** 30, needBytes: 2 ** 31, nodesOnDisk: ["p1"], copyFrom: ["p1"], nodesServing: ["abcdef0123456789"], capacityBytes: 2 ** 30, host: "abcdef0123456789", servedBy: undefined, servers: [], split: false, idle: false, status: "needs-capacity" },
      ],
    },
  }, undefined);
  expect(text).toContain("token    - (`mesh token`");
  expect(text).toContain("models   1  assigned big  fetching big 50%");
  expect(text).toContain("  big  needs-capacity  host abcdef0123 (this node)  group 1  need 2.0 GiB of 1.0 GiB");
});

describe("direct RPC path", () => {
  const secret = new Uint8Array(32).fill(5);
  const hostKey = new Uint8Array(32).fill(3);
  const host = nodeIdOf(hostKey);
  const signHost = nodeSigner(hostKey);
  const cert = "ab".repeat(32);
  test("the hello round-trips; the MAC binds host, worker, certificate and secret; the signature is the host's own", () => {
    const statement = directStatement(host, "worker", cert);
    const mac = directMac(secret, host, "worker", cert);
    const bytes = encodeDirectHello(host, mac, signHost(statement));
    const hello = decodeDirectHello(new Uint8Array([...bytes, 14, 0]));
    expect(hello).toMatchObject({ purpose: "rpc", hostId: host, rest: new Uint8Array([14, 0]) });
    const { mac: got, signature } = hello as { mac: Uint8Array; signature: Uint8Array };
    expect(verifyDirectMac(mac, got)).toBe(true);
    for (const other of [directMac(secret, host, "worker2", cert), directMac(secret, host, "worker", "cd".repeat(32)), directMac(new Uint8Array(32), host, "worker", cert)]) {
      expect(verifyDirectMac(other, mac)).toBe(false);
    }
    expect(signedBy(host, statement, signature)).toBe(true);
    // Another node's id, the statement for another worker or purpose, or a key that is not the id's: no.
    expect(signedBy(nodeIdOf(new Uint8Array(32).fill(4)), statement, signature)).toBe(false);
    expect(signedBy(host, directStatement(host, "worker2", cert), signature)).toBe(false);
    expect(signedBy(host, directStatement(host, "worker", cert, "model"), signature)).toBe(false);
    expect(signedBy(host, statement, nodeSigner(new Uint8Array(32).fill(4))(statement))).toBe(false);
    expect(signedBy("not-a-node-id", statement, signature)).toBe(false);
  });
  test.each([
    [new Uint8Array([0xff]), { need: 2 }],
    [new Uint8Array([0, 4, 104]), { error: "a hello without the member's signature (a node of an older version)" }],
    [new Uint8Array([0xff, 0xff, 1, 0, 4]), { error: "a hello without the member's signature (a node of an older version)" }],
    [new Uint8Array([0xff, 0xfe]), { need: 5 }],
    [new Uint8Array([0xff, 0xfe, 9, 0, 4]), { error: "unknown purpose 9" }],
    [new Uint8Array([0xff, 0xfe, 1, 0, 0]), { error: "host id of 0 bytes" }],
    [new Uint8Array([0xff, 0xfe, 1, 1, 1]), { error: "host id of 257 bytes" }],
    [new Uint8Array([0xff, 0xfe, 1, 0, 4, 104]), { need: 5 + 4 + 32 + 64 }],
  ])("partial or bad hello %#", (bytes, expected) => expect(decodeDirectHello(bytes)).toEqual(expected));
  test("a model copy's hello says so, and its proof opens nothing else (nor an RPC proof a copy)", () => {
    const rpcMac = directMac(secret, host, "worker", cert);
    const modelMac = directMac(secret, host, "worker", cert, "model");
    expect(verifyDirectMac(rpcMac, modelMac)).toBe(false);
    const hello = decodeDirectHello(new Uint8Array([...encodeDirectHello(host, modelMac, signHost(directStatement(host, "worker", cert, "model")), "model"), 7]));
    expect(hello).toMatchObject({ purpose: "model", hostId: host, rest: new Uint8Array([7]) });
    expect(verifyDirectMac(modelMac, (hello as { mac: Uint8Array }).mac)).toBe(true);
  });
  test.each([
    [["127.0.0.1:4000", "[::1]:4001"], "127.0.0.1"],
    [["[::1]:4001"], "::1"],
    [[], undefined],
  ] as const)("directHost(%p) = %p", (addresses, host) => expect(directHost(addresses)).toBe(host));
  const at = { host: "10.0.0.2", port: 7000, certSha256: cert };
  test.each([
    ["a peer offering it", { addresses: ["10.0.0.2:4433"], signedDirect: { port: 7000, certSha256: cert } }, at],
    ["a peer with the direct path off", { addresses: ["10.0.0.2:4433"] }, undefined],
    ["a peer with no address", { addresses: [], signedDirect: { port: 7000, certSha256: cert } }, undefined],
    ["no such peer", undefined, undefined],
  ] as const)("directTarget: %s", (_label, peer, expected) => expect(directTarget(peer)).toEqual(expected));

  test("a node from before signed hellos offers its path as `direct`: it is not read, so neither end uses the other's", () => {
    const old = AnnouncementSchema.parse({ ...fakeAnnouncement("a".repeat(64)), addresses: ["10.0.0.2:4433"], direct: { port: 7000, certSha256: cert, models: true } });
    expect(directTarget(old)).toBeUndefined();
  });
});

describe("closedAsDuplicate: a request on a connection closed for another one goes again", () => {
  test.each([
    ['ConnectionLost(ApplicationClosed(ApplicationClose { error_code: 409, reason: b"duplicate connection" }))', true],
    ['ApplicationClosed(ApplicationClose { error_code: 409, reason: b"duplicate connection" })', true],
    ['ApplicationClosed(ApplicationClose { error_code: 0, reason: b"leaving" })', false],
    ["TimedOut", false],
    ["", false],
  ])("%s", (reason, expected) => expect(closedAsDuplicate(reason)).toBe(expected));
});

describe("resetByPeer: a connection a live member reset is dialed again and a request waits for it", () => {
  test.each([
    ["reset by peer", true],
    ["ConnectionLost(Reset)", true],
    ["Reset", true],
    ['ApplicationClosed(ApplicationClose { error_code: 409, reason: b"duplicate connection" })', false],
    ["timed out", false],
    ["ConnectionLost(TimedOut)", false],
    ["reset the model", false],
    ["", false],
  ])("%s", (reason, expected) => expect(resetByPeer(reason)).toBe(expected));
});
