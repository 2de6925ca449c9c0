/**
 * Attacks on a node's direct RPC port (TLS over TCP, `--rpc-direct on`), which anyone who can reach
 * the `--quic-bind` host can connect to: raw TCP that never starts TLS must be closed at the
 * handshake deadline; one source gets a few unproved slots and no more; when many sources fill all
 * of them, the oldest go, so a member with its proof still gets through (proved connections count
 * against no unproved cap, only their member's share of RPC sessions; and a member's hello is signed
 * by the id it names, so one member cannot speak as another); refusals are logged a line at a time, not one per attempt; and the port must
 * listen on the `--quic-bind` host only.
 */
import { afterAll, afterEach, expect, test } from "bun:test";
import { createConnection, type Socket } from "node:net";
import tls from "node:tls";
import { decodeJoinToken } from "../../mesh/join-token.ts";
import { encodeDirectHello } from "../../tunnel/direct-auth.ts";
import { normalizeFingerprint } from "../../tunnel/direct-identity.ts";
import { HANDSHAKE_DEADLINE_MS, MAX_UNPROVED_CONNECTIONS, MAX_UNPROVED_PER_SOURCE, sourceKey } from "../../tunnel/direct.ts";
import { encodeHello } from "../../tunnel/rpc-protocol.ts";
import { MAX_RPC_SESSIONS_PER_PEER } from "../../tunnel/rpc-sessions.ts";
import { killAllChildren } from "../../harness/children.ts";
import { startMeshNode, type MeshTestNode } from "../../harness/mesh.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { RoguePeer, type RogueMembership } from "../../harness/rogue-peer.ts";
import { waitFor, withDeadline } from "../../harness/wait.ts";

const nodes: MeshTestNode[] = [];
const rogues: RoguePeer[] = [];
const members: RogueMembership[] = [];
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const m of members.splice(0)) m.close();
  await Promise.all(rogues.splice(0).map((r) => r.close()));
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
});
afterAll(killAllChildren);

/** A node offering the direct path, and a member (a rogue peer) that learned its direct port. */
async function nodeAndMember() {
  const node = await startMeshNode([...SMALL_LLAMA, "--rpc-direct", "on"]);
  nodes.push(node);
  await node.child.waitForOutput(/rpc-server ready/, 60_000);
  const token = decodeJoinToken(node.token);
  const rogue = await RoguePeer.start();
  rogues.push(rogue);
  const member = await rogue.member(token);
  members.push(member);
  const port = await waitFor(() => member.announcement?.signedDirect?.port, { what: "the node to announce its direct port" });
  return { node, token, rogue, port };
}

/** One more member of the node's mesh (a rogue peer). */
async function anotherMember(token: ReturnType<typeof decodeJoinToken>): Promise<RoguePeer> {
  const rogue = await RoguePeer.start();
  rogues.push(rogue);
  members.push(await rogue.member(token));
  return rogue;
}

/** A raw TCP connection, tracked, with when it opened and closed; `from` picks the source address. */
function rawConnection(host: string, port: number, from?: string): { socket: Socket; opened: Promise<number>; closed: Promise<number> } {
  const socket = createConnection({ host, port, ...(from ? { localAddress: from } : {}) });
  sockets.push(socket);
  socket.on("error", () => undefined);
  const opened = new Promise<number>((resolve, reject) => {
    socket.once("connect", () => resolve(Date.now()));
    socket.once("error", reject);
  });
  const closed = new Promise<number>((resolve) => socket.once("close", () => resolve(Date.now())));
  return { socket, opened, closed };
}

/**
 * A member's connection with its proof sent. With `hello`, also rpc-server's answer to HELLO through
 * the direct path; rpc-server serves one connection at a time, so only while no other one is open.
 */
async function memberConnection(node: MeshTestNode, secret: Uint8Array, rogue: RoguePeer, port: number, hello: boolean): Promise<tls.TLSSocket> {
  const ok = tls.connect({ host: "127.0.0.1", port, rejectUnauthorized: false });
  sockets.push(ok);
  await new Promise((r) => ok.once("secureConnect", r));
  const cert = normalizeFingerprint(ok.getPeerCertificate().fingerprint256);
  ok.write(rogue.directHello(secret, node.nodeId, cert));
  if (!hello) return ok;
  ok.write(encodeHello());
  let answer = Buffer.alloc(0);
  ok.on("data", (d: Buffer) => (answer = Buffer.concat([answer, d])));
  await waitFor(() => answer.length >= 8 + 3, { what: "rpc-server's answer to HELLO through the direct path", timeoutMs: 10_000 });
  expect(answer[8]).toBe(7);
  return ok;
}

/** How many lines of the node's log so far match `pattern`. */
const logLines = (node: MeshTestNode, pattern: RegExp) => node.child.output().split("\n").filter((l) => pattern.test(l)).length;

test("raw TCP that never starts TLS is closed at the handshake deadline; a member's proof still gets through", async () => {
  const { node, token, rogue, port } = await nodeAndMember();
  const raw = rawConnection("127.0.0.1", port);
  const opened = await raw.opened;
  const closedAt = await withDeadline(raw.closed, HANDSHAKE_DEADLINE_MS + 10_000, "the node to close a connection that never started TLS");
  const heldMs = closedAt - opened;
  console.log(`raw TCP without TLS held open for ${heldMs} ms (deadline ${HANDSHAKE_DEADLINE_MS} ms)`);
  expect(heldMs).toBeGreaterThanOrEqual(HANDSHAKE_DEADLINE_MS - 500);
  expect(heldMs).toBeLessThan(HANDSHAKE_DEADLINE_MS + 5_000);

  // TLS done but no proof: the same deadline, counted from the TCP accept.
  const quiet = tls.connect({ host: "127.0.0.1", port, rejectUnauthorized: false });
  sockets.push(quiet);
  quiet.on("error", () => undefined);
  const started = Date.now();
  await new Promise((r) => quiet.once("secureConnect", r));
  await withDeadline(new Promise((r) => quiet.once("close", r)), HANDSHAKE_DEADLINE_MS + 10_000, "the node to close a TLS connection that sent no proof");
  expect(Date.now() - started).toBeLessThan(HANDSHAKE_DEADLINE_MS + 5_000);

  // A member with its proof: rpc-server answers its HELLO (and the deadline does not cut it off).
  const ok = await memberConnection(node, token.secret, rogue, port, true);
  await Bun.sleep(HANDSHAKE_DEADLINE_MS + 500); // an observation window, not synchronization: it must stay open
  expect(ok.destroyed).toBe(false);
}, 60_000);

test("wrong proofs are all refused, and logged in one line rather than one each", async () => {
  const { node, port } = await nodeAndMember();
  const attempts = 20;
  for (let i = 0; i < attempts; i++) {
    const bad = tls.connect({ host: "127.0.0.1", port, rejectUnauthorized: false });
    sockets.push(bad);
    bad.on("error", () => undefined);
    await new Promise((r) => bad.once("secureConnect", r));
    bad.write(encodeDirectHello("f".repeat(64), new Uint8Array(32), new Uint8Array(64)));
    await withDeadline(new Promise((r) => bad.once("close", r)), 5_000, "the node to close a connection with a wrong proof");
  }
  const lines = logLines(node, /refused direct connections without a member's proof/);
  console.log(`${attempts} wrong proofs refused: ${lines} log line(s)`);
  expect(lines).toBe(1);
}, 60_000);

test("a member speaking as another member (the mesh's MAC, its own signature) is refused: the id a hello names is the sender's own", async () => {
  const { node, token, rogue, port } = await nodeAndMember();
  const other = await anotherMember(token);
  const impostor = tls.connect({ host: "127.0.0.1", port, rejectUnauthorized: false });
  sockets.push(impostor);
  impostor.on("error", () => undefined);
  await new Promise((r) => impostor.once("secureConnect", r));
  const cert = normalizeFingerprint(impostor.getPeerCertificate().fingerprint256);
  impostor.write(Buffer.concat([rogue.directHello(token.secret, node.nodeId, cert, "rpc", other.transport.nodeId), encodeHello()]));
  let received = 0;
  impostor.on("data", (d: Buffer) => (received += d.length));
  await withDeadline(new Promise((r) => impostor.once("close", r)), 5_000, "the node to close the impostor's connection");
  expect(received).toBe(0);
  await node.child.waitForOutput(/refused direct connections without a member's proof.*not signed by the member it names/);
  // Each one's own hello still gets through.
  for (const m of [rogue, other]) (await memberConnection(node, token.secret, m, port, true)).destroy();
}, 60_000);

test("a flood of unproved sockets never keeps a member out: one source gets its few slots, and when many fill them all the oldest go", async () => {
  const { node, token, rogue, port } = await nodeAndMember();
  // Proved connections, more than one source's share, all from 127.0.0.1 and older than the flood:
  // counted as unproved, the last ones would be refused and all of them closed first to make room.
  // Spread over members, since one member holds at most MAX_RPC_SESSIONS_PER_PEER sessions.
  const proved: tls.TLSSocket[] = [await memberConnection(node, token.secret, rogue, port, true)];
  const owners = [rogue];
  for (let i = 0; i < MAX_UNPROVED_PER_SOURCE + 1; i++) {
    if (i + 1 >= owners.length * MAX_RPC_SESSIONS_PER_PEER) owners.push(await anotherMember(token));
    proved.push(await memberConnection(node, token.secret, owners.at(-1)!, port, false));
  }
  await Bun.sleep(HANDSHAKE_DEADLINE_MS + 500); // an observation window: past the deadline, all proved
  expect(proved.filter((m) => m.destroyed)).toHaveLength(0);

  // One source: its share is held, the rest refused at once.
  const start = Date.now();
  const extra = 8;
  const first = Array.from({ length: MAX_UNPROVED_PER_SOURCE + extra }, () => rawConnection("127.0.0.1", port, "127.0.0.2"));
  await Promise.all(first.map((c) => c.opened.catch(() => 0)));
  const refused = await waitFor(
    () => {
      const n = first.filter((c) => c.socket.destroyed).length;
      return n >= extra ? n : undefined;
    },
    { what: `${extra} connections over one source's share to be refused`, timeoutMs: HANDSHAKE_DEADLINE_MS - 2_000 },
  );
  const held = first.filter((c) => !c.socket.destroyed);
  expect(refused).toBe(extra);
  expect(held).toHaveLength(MAX_UNPROVED_PER_SOURCE);

  // Many sources fill every unproved slot; each batch is in the kernel's queue before the next.
  const sources = Array.from({ length: MAX_UNPROVED_CONNECTIONS / MAX_UNPROVED_PER_SOURCE - 1 }, (_, i) => `127.0.0.${i + 3}`);
  const rest: ReturnType<typeof rawConnection>[] = [];
  for (const from of sources) {
    const batch = Array.from({ length: MAX_UNPROVED_PER_SOURCE }, () => rawConnection("127.0.0.1", port, from));
    await Promise.all(batch.map((c) => c.opened));
    rest.push(...batch);
  }
  // One more source: the oldest unproved ones (the first source's) make room, long before their deadline.
  const late = Array.from({ length: MAX_UNPROVED_PER_SOURCE }, () => rawConnection("127.0.0.1", port, "127.0.0.200"));
  await Promise.all(late.map((c) => c.opened));
  await withDeadline(Promise.all(held.map((c) => c.closed)), HANDSHAKE_DEADLINE_MS - (Date.now() - start) - 500, "the oldest unproved connections to be closed for newer ones");
  const evictedMs = Date.now() - start;
  const raw = [...rest, ...late];
  expect(raw.filter((c) => c.socket.destroyed)).toHaveLength(0);
  expect(proved.filter((m) => m.destroyed)).toHaveLength(0);

  // Every unproved slot holds a raw socket: a member's proof still gets HELLO answered (once the
  // earlier members' connections are gone, since rpc-server serves one at a time).
  for (const m of proved) m.destroy();
  const member = await memberConnection(node, token.secret, rogue, port, true);
  const memberMs = Date.now() - start;
  const stillHeld = raw.filter((c) => !c.socket.destroyed).length;
  console.log(
    `${proved.length} proved connections kept; one source: ${refused} of ${first.length} refused; ${raw.length} more from ${sources.length + 1} sources: the first source's ${held.length} closed within ${evictedMs} ms; a member got HELLO answered within ${memberMs} ms with ${stillHeld} raw sockets held (caps ${MAX_UNPROVED_CONNECTIONS}, ${MAX_UNPROVED_PER_SOURCE} per source)`,
  );
  expect(member.destroyed).toBe(false);
  expect(stillHeld).toBe(MAX_UNPROVED_CONNECTIONS - 1);
  expect(memberMs).toBeLessThan(HANDSHAKE_DEADLINE_MS);

  // Then all the raw ones go at their deadline; each kind of refusal was logged once, not per socket.
  await withDeadline(Promise.all(raw.map((c) => c.closed)), HANDSHAKE_DEADLINE_MS + 10_000, "every raw connection to be closed at the deadline");
  expect(member.destroyed).toBe(false);
  expect(logLines(node, /refused direct connections over the cap per source/)).toBe(1);
  expect(logLines(node, /closed the oldest unproved direct connections/)).toBe(1);
}, 60_000);

test("the per-source cap counts an IPv4 address, mapped or not, and an IPv6 /64", () => {
  expect(sourceKey("192.0.2.7")).toBe("192.0.2.7");
  expect(sourceKey("::ffff:192.0.2.7")).toBe("192.0.2.7");
  expect(sourceKey("2001:db8:1:2:aaaa::1")).toBe("2001:db8:1:2::/64");
  expect(sourceKey("2001:db8:1:2:bbbb:cccc:dddd:eeee")).toBe("2001:db8:1:2::/64");
  expect(sourceKey("2001:db8::1")).toBe("2001:db8:0:0::/64");
  expect(sourceKey("fe80::1%eth0")).toBe("fe80:0:0:0::/64");
  expect(sourceKey("::1")).toBe("0:0:0:0::/64");
  expect(sourceKey(undefined)).toBe("");
});

test("the direct port listens on the --quic-bind host only", async () => {
  const { port } = await nodeAndMember();
  // 127.0.0.2 is loopback too: a port bound to 0.0.0.0 would accept there.
  const other = rawConnection("127.0.0.2", port);
  await expect(other.opened).rejects.toThrow();
  const same = rawConnection("127.0.0.1", port);
  expect(await same.opened).toBeGreaterThan(0);
}, 60_000);
