/**
 * Membership end to end: real node processes with real iroh endpoints on loopback (relays off),
 * joined by token; authentication, gossip, liveness, restarts and junk on the control stream.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { createSocket } from "node:dgram";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { decodeJoinToken, encodeJoinToken } from "../../mesh/join-token.ts";
import { killAllChildren } from "../../harness/children.ts";
import { meshStatus, peerIds, startMeshNode, waitForFullMesh, type MeshTestNode } from "../../harness/mesh.ts";
import { startNode, TEST_LINE, TEST_TRANSPORT } from "../../harness/node.ts";
import { RoguePeer, type Junk } from "../../harness/rogue-peer.ts";
import { waitFor } from "../../harness/wait.ts";

const nodes: MeshTestNode[] = [];
/** State dirs a restarted node took over from a stopped one, removed after each test. */
const reused: string[] = [];
async function node(args: string[] = [], opts: Parameters<typeof startMeshNode>[1] = {}): Promise<MeshTestNode> {
  const n = await startMeshNode(args, opts);
  nodes.push(n);
  return n;
}
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
  for (const dir of reused.splice(0)) rmSync(dir, { recursive: true, force: true });
});
afterAll(killAllChildren);

test("five nodes form a full mesh, including one that joins with a non-founder's token", async () => {
  const a = await node();
  const [b, c] = await Promise.all([node(["--join", a.token]), node(["--join", a.token])]);
  const [d, e] = await Promise.all([node(["--join", b.token]), node(["--join", c.token])]);
  await waitForFullMesh([a, b, c, d, e]);
  const status = await meshStatus(d);
  // The token carries the mesh secret: it stays in the state dir (meshReady read d.token there).
  expect(status).not.toHaveProperty("token");
  expect(status.peers.map((p) => p.role)).toEqual(["worker", "worker", "worker", "worker"]);
  expect(status.peers.every((p) => p.addresses.every((addr) => addr.startsWith("127.0.0.1:") || addr.startsWith("[::1]:")))).toBe(true);
});

test("a node with the wrong mesh secret is refused and appears nowhere", async () => {
  const a = await node();
  const b = await node(["--join", a.token]);
  await waitForFullMesh([a, b]);
  const real = decodeJoinToken(a.token);
  const forged = encodeJoinToken({ ...real, secret: new Uint8Array(32).fill(9) });
  const w = await node(["--join", forged]);
  await w.child.waitForOutput(/could not join the mesh; retrying .*could not prove the mesh secret/);
  await a.child.waitForOutput(/refused a peer that failed authentication/);
  expect(await peerIds(a)).toEqual([b.nodeId]);
  expect(await peerIds(b)).toEqual([a.nodeId]);
  expect(await peerIds(w)).toEqual([]);
});

test("--transport against its token's line is refused at start, naming both, never half-joined", async () => {
  const a = await node();
  const other = TEST_LINE === "iroh1" ? "iroh035" : "iroh1";
  expect(decodeJoinToken(a.token).line ?? "iroh035").toBe(TEST_LINE);
  // Flags after the test's own: the last --transport wins. Refused before the node listens or builds anything.
  const refused = startNode(["--join", a.token, "--transport", other]);
  await expect(refused).rejects.toThrow(new RegExp(`exited \\(1\\)[^]*this join token is for a mesh on ${TEST_LINE}, and --transport says ${other}: leave --transport out`));
  expect(await peerIds(a)).toEqual([]);
});

// Both lines in one run: the suite's matrix run would only repeat them.
describe.skipIf(TEST_TRANSPORT !== undefined).each(["iroh035", "iroh1"] as const)("a mesh on %s", (line) => {
  test("a joiner given no --transport follows its token, says so in its status, and a restart without --join comes back on it", async () => {
    const a = await node(["--transport", line], { ownLine: true });
    expect(decodeJoinToken(a.token).line ?? "iroh035").toBe(line);
    const b = await node(["--join", a.token], { ownLine: true });
    await waitForFullMesh([a, b]);
    const status = await meshStatus(b);
    expect(status.line).toBe(line);
    expect(status.relay).toBe("disabled");
    expect(status.peers.map((p) => [p.line, p.relayUrl])).toEqual([[line, undefined]]);
    // Said once at start by every node of a 0.35 mesh, and by none of an iroh1 one.
    const retiring = /this mesh runs on iroh 0\.35, whose public relays are being retired .*"Moving a mesh to iroh 1\.x" in the README/;
    expect(retiring.test(b.child.output())).toBe(line === "iroh035");
    // As a systemd unit restarts it: the state dir and no flags about the mesh.
    expect(await b.child.stop()).toBe(0);
    nodes.splice(nodes.indexOf(b), 1);
    reused.push(b.stateDir);
    const again = await node(["--state-dir", b.stateDir], { ownLine: true });
    expect(again.nodeId).toBe(b.nodeId);
    expect((await meshStatus(again)).line).toBe(line);
    expect(decodeJoinToken(again.token).line ?? "iroh035").toBe(line);
    await waitForFullMesh([a, again], 60_000);
  });
});

test.skipIf(TEST_TRANSPORT !== undefined)("a 0.35 mesh moves to iroh1: the founder restarted with --transport iroh1 makes a new token, members restarted with it keep their ids", async () => {
  const a = await node(["--transport", "iroh035"], { ownLine: true });
  const b = await node(["--join", a.token], { ownLine: true });
  await waitForFullMesh([a, b]);
  for (const n of [a, b]) {
    expect(await n.child.stop()).toBe(0);
    nodes.splice(nodes.indexOf(n), 1);
    reused.push(n.stateDir);
  }
  const a2 = await node(["--state-dir", a.stateDir, "--transport", "iroh1"], { ownLine: true });
  expect(a2.nodeId).toBe(a.nodeId);
  expect(a2.child.output()).toContain("this node's mesh moves from iroh035 to iroh1: its members join again with the new join token");
  const moved = decodeJoinToken(a2.token);
  expect(moved.line).toBe("iroh1");
  expect(moved.secret).toEqual(decodeJoinToken(a.token).secret);
  const b2 = await node(["--state-dir", b.stateDir, "--join", a2.token], { ownLine: true });
  expect(b2.nodeId).toBe(b.nodeId);
  await waitForFullMesh([a2, b2], 60_000);
  expect((await meshStatus(b2)).line).toBe("iroh1");
  expect(b2.child.output()).not.toContain("being retired");
  // The move is remembered: the founder restarted with no flag stays on iroh1.
  expect(await a2.child.stop()).toBe(0);
  nodes.splice(nodes.indexOf(a2), 1);
  const a3 = await node(["--state-dir", a.stateDir], { ownLine: true });
  expect(decodeJoinToken(a3.token).line).toBe("iroh1");
  await waitForFullMesh([a3, b2], 60_000);
});

test("a node of the 0.35 line that reaches a 1.x node (QUIC lets it) is refused in the handshake, never a member", async () => {
  const a = await node(["--transport", "iroh1"]);
  const old = await RoguePeer.start("iroh035");
  try {
    // Proof and all, as an older node given this token would: the node hangs up before its hello.
    expect(await old.tryJoin(decodeJoinToken(a.token))).toBeNull();
  } finally {
    await old.close();
  }
  await a.child.waitForOutput(/the peer runs iroh035 and this node runs iroh1: a mesh runs one iroh line/);
  expect(await peerIds(a)).toEqual([]);
});

test("kill -9 of a node removes it from every view; a graceful exit does too", async () => {
  const a = await node();
  const others = await Promise.all([1, 2, 3].map(() => node(["--join", a.token])));
  const all = [a, ...others];
  await waitForFullMesh(all);
  const [victim, leaver, ...rest] = others as [MeshTestNode, MeshTestNode, MeshTestNode];
  victim.child.proc.kill("SIGKILL");
  await waitForFullMesh([a, leaver, ...rest]);
  expect(await leaver.stop()).toBe(0);
  nodes.splice(nodes.indexOf(leaver), 1);
  await waitForFullMesh([a, ...rest]);
  expect(a.child.output()).toContain("reason=left");
});

/** A founder a and a member b, stopped with its state dir kept: the dir it restarts from. */
async function memberStopped(): Promise<{ a: MeshTestNode; b: MeshTestNode; stateDir: string }> {
  const a = await node();
  const b = await node(["--join", a.token]);
  await waitForFullMesh([a, b]);
  expect(await b.child.stop()).toBe(0);
  nodes.splice(nodes.indexOf(b), 1);
  reused.push(b.stateDir);
  return { a, b, stateDir: b.stateDir };
}

test("a restart with the same state dir keeps the node id and rejoins", async () => {
  const { a, b, stateDir } = await memberStopped();
  await waitFor(async () => (await peerIds(a)).length === 0, { what: "b to leave" });
  const again = await node(["--join", a.token, "--state-dir", stateDir]);
  expect(again.nodeId).toBe(b.nodeId);
  await waitForFullMesh([a, again]);
});

test("a restart whose old QUIC port another program took meanwhile binds another, keeps its id and rejoins", async () => {
  const { a, b, stateDir } = await memberStopped();
  const { v4 } = JSON.parse(readFileSync(join(stateDir, "quic-ports.json"), "utf8")) as { v4: number };
  const squatter = createSocket("udp4");
  await new Promise<void>((resolve, reject) => {
    squatter.once("error", reject);
    squatter.bind({ port: v4, address: "127.0.0.1", exclusive: true }, resolve);
  });
  try {
    const again = await node(["--join", a.token, "--state-dir", stateDir]);
    expect(again.nodeId).toBe(b.nodeId);
    expect(again.child.output()).toContain("a QUIC port this node had last time is taken now");
    await waitForFullMesh([a, again]);
  } finally {
    squatter.close();
  }
});

test("members that lose every peer find the mesh again: a founder killed and restarted is rejoined", async () => {
  const a = await node();
  const b = await node(["--join", a.token]);
  await waitForFullMesh([a, b]);
  a.child.proc.kill("SIGKILL");
  nodes.splice(nodes.indexOf(a), 1);
  await waitFor(async () => (await peerIds(b)).length === 0, { what: "b to drop the killed founder" });
  // Same state dir, so the same id and ports; no --join: b must be the one that dials.
  reused.push(a.stateDir);
  const again = await node(["--state-dir", a.stateDir]);
  expect(again.nodeId).toBe(a.nodeId);
  await waitForFullMesh([again, b], 60_000);
});

test("a founder stopped and restarted without a token finds its mesh of three again (members forget a node that said goodbye while they have each other)", async () => {
  const a = await node();
  const [b, c] = await Promise.all([node(["--join", a.token]), node(["--join", a.token])]);
  await waitForFullMesh([a, b, c]);
  expect(await a.child.stop()).toBe(0);
  nodes.splice(nodes.indexOf(a), 1);
  reused.push(a.stateDir);
  await waitForFullMesh([b, c]);
  const again = await node(["--state-dir", a.stateDir]);
  expect(again.nodeId).toBe(a.nodeId);
  await waitForFullMesh([again, b, c], 60_000);
});

test("the identity key and mesh secret are private files", async () => {
  const a = await node();
  const { statSync } = await import("node:fs");
  expect(statSync(a.stateDir).mode & 0o777).toBe(0o700);
  expect(statSync(`${a.stateDir}/node.key`).mode & 0o777).toBe(0o600);
  expect(statSync(`${a.stateDir}/mesh.secret`).mode & 0o777).toBe(0o600);
});

describe("junk on the control stream drops that peer and nothing else", () => {
  let rogue: RoguePeer;
  let a: MeshTestNode;
  let b: MeshTestNode;
  beforeAll(async () => {
    [rogue, a] = await Promise.all([RoguePeer.start(), startMeshNode()]);
    b = await startMeshNode(["--join", a.token]);
    await waitForFullMesh([a, b]);
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop(), rogue?.close()]);
  });

  test.each(["random-bytes", "oversized-length", "invalid-json", "wrong-shape"] as const)("%s", async (junk: Junk) => {
    const dropsBefore = [...a.child.output().matchAll(/reason="?sent junk/g)].length;
    const closed = await rogue.misbehave(decodeJoinToken(a.token), junk);
    expect(closed).toContain("400");
    await waitFor(() => [...a.child.output().matchAll(/reason="?sent junk/g)].length > dropsBefore, { what: "a to drop the rogue" });
    expect(await peerIds(a)).toEqual([b.nodeId]);
    expect(await peerIds(b)).toEqual([a.nodeId]);
    expect((await fetch(`${a.url}/health`)).status).toBe(200);
  });

  test("garbage instead of a handshake is refused", async () => {
    const closed = await rogue.garbageHandshake(decodeJoinToken(a.token));
    expect(closed).toContain("401");
    expect(await peerIds(a)).toEqual([b.nodeId]);
  });
});

test("a node without a join token founds its own mesh; /api/status before the endpoint is up says starting", async () => {
  const plain = await startNode();
  const early = await meshStatus(plain);
  expect(["starting", "running"]).toContain(early.state);
  await plain.stop();
});
