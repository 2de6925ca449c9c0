/**
 * The mesh endpoint's fast start with real iroh on loopback (relays off, no discovery): the node id
 * we derive from a key is iroh's, the address worked out at start is the one iroh binds, a dial made
 * before either end is up waits and connects, and an endpoint that cannot bind says so.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { nodeIdOf, Transport, TRANSPORT_LINES, type PeerConnection, type TransportLine, type TransportOptions } from "../../mesh/transport.ts";
import { waitFor } from "../../harness/wait.ts";

const started: Transport[] = [];
afterAll(async () => {
  await Promise.all(started.map((t) => t.close().catch(() => undefined)));
});

async function start(line: TransportLine, opts: Partial<TransportOptions> = {}): Promise<{ t: Transport; moved: string[][]; accepted: PeerConnection[] }> {
  const moved: string[][] = [];
  const accepted: PeerConnection[] = [];
  const t = await Transport.start({
    secretKey: Uint8Array.from(randomBytes(32)),
    ipv4Addr: "127.0.0.1:0",
    ipv6Addr: "[::1]:0",
    relay: "disabled",
    line,
    onConnection: (c) => accepted.push(c),
    onAddress: (a) => moved.push(a.addresses),
    ...opts,
  });
  started.push(t);
  return { t, moved, accepted };
}

describe.each(TRANSPORT_LINES)("%s", (line) => {
  test("node ids and addresses known at start are iroh's; a dial made before the ends are up connects", async () => {
    const keys = [Buffer.from("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60", "hex"), randomBytes(32), randomBytes(32)];
    const ends = await Promise.all(keys.map((k) => start(line, { secretKey: Uint8Array.from(k) })));
    const early = ends.map((e) => e.t.addr());
    for (const [i, e] of ends.entries()) {
      expect(e.t.nodeId).toBe(nodeIdOf(keys[i]!));
      expect(early[i]!.addresses).toHaveLength(2);
    }
    const [a, b] = ends as [(typeof ends)[0], (typeof ends)[0]];
    // Issued at once: it waits for b's endpoint, and a's accepts once up.
    const conn = await b.t.dial(early[0]!);
    expect(conn.remoteId).toBe(a.t.nodeId);
    // `ready` rejects when iroh's id for the key differs from ours: every one resolved.
    await Promise.all(ends.map((e) => e.t.ready));
    for (const [i, e] of ends.entries()) {
      expect(e.moved).toEqual([]);
      expect(e.t.addr()).toEqual(early[i]!);
    }
    // The dialer's side is up first: the acceptor hears of the connection a moment later.
    await waitFor(() => a.accepted.length > 0, { what: "a to accept b's connection", timeoutMs: 10_000 });
    expect(a.accepted.map((c) => c.remoteId)).toEqual([b.t.nodeId]);
  });

  test.if(line === "iroh1")("an endpoint that stopped on its own is replaced by one with the same key, which dials out and is dialed", async () => {
    const [a, b] = await Promise.all([start(line), start(line)]);
    expect((await b.t.dial(a.t.addr())).remoteId).toBe(a.t.nodeId);
    // As when iroh's QUIC driver ends: a's endpoint closes under the transport, which did not close it.
    await (a.t as unknown as { endpoint: { close(): Promise<void> } }).endpoint.close();
    // Dials wait for the new endpoint; the old one's ports are mostly still held, so the new one
    // says its address, and b reaches a there.
    expect((await a.t.dial(b.t.addr())).remoteId).toBe(b.t.nodeId);
    expect((await b.t.dial(a.t.addr())).remoteId).toBe(a.t.nodeId);
    await waitFor(() => a.accepted.length === 2, { what: "a to accept b's second connection", timeoutMs: 10_000 });
    expect(a.accepted.map((c) => c.remoteId)).toEqual([b.t.nodeId, b.t.nodeId]);
  });

  test("closed while its endpoint starts (a node stopped as it comes up): `ready` still resolves, and the close with it", async () => {
    const { t } = await start(line);
    const closed = t.close();
    await t.ready;
    await closed;
  });

  test("an address that cannot be bound makes `ready` fail, naming it", async () => {
    // TEST-NET-3 (RFC 5737): no interface here has it.
    const { t } = await start(line, { ipv4Addr: "203.0.113.7:0" });
    await expect(t.ready).rejects.toThrow("203.0.113.7");
  });
});
