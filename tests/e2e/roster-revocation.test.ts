/**
 * Issue 42, taking a guest's pass back without re-keying anyone: `mesh guests revoke NAME` on one
 * of the owner's machines signs a revocation that its node reads from the state dir and gossips;
 * every node of the roster, the owner's others and the guests alike, drops the pass's nodes within
 * seconds and refuses them at admission from then on. A pass that expires goes the same way. Real
 * nodes (a real guest's node among them); the expiring pass's holder is built from our modules.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { killAllChildren } from "../../harness/children.ts";
import { meshStatus, startMeshNode, waitForFullMesh, type MeshTestNode } from "../../harness/mesh.ts";
import { meshCommand } from "../../harness/node.ts";
import { RoguePeer } from "../../harness/rogue-peer.ts";
import { waitFor } from "../../harness/wait.ts";
import { decodeJoinToken } from "../../mesh/join-token.ts";
import { readRosterKeys } from "../../mesh/roster-files.ts";
import { issuePass, ownClaim } from "../../mesh/roster.ts";

let a: MeshTestNode;
let b: MeshTestNode;
let guest: MeshTestNode;
const rogues: RoguePeer[] = [];

const cli = (...args: string[]) => {
  const p = Bun.spawnSync([...meshCommand(), ...args]);
  if (p.exitCode !== 0) throw new Error(`mesh ${args.join(" ")}: ${p.stderr.toString()}`);
  return p.stdout.toString().trim();
};
const peerIdsOf = async (n: MeshTestNode) => (await meshStatus(n)).peers.map((p) => p.nodeId);
const refusedBy = async (n: MeshTestNode, id: string) => ((await meshStatus(n)).refused ?? []).filter((r) => r.nodeId === id).map((r) => r.why);

beforeAll(async () => {
  a = await startMeshNode();
  b = await startMeshNode(["--join", a.token]);
  guest = await startMeshNode(["--join", cli("token", "--guest", "--name", "visitor", "--state-dir", a.stateDir)]);
  await waitForFullMesh([a, b, guest]);
}, 120_000);

afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop(), guest?.stop(), ...rogues.map((r) => r.close())]);
  await killAllChildren();
});

test("each node sees the guest for what its pass says, and the guest sees the owner's machines as vouched", async () => {
  for (const n of [a, b]) expect((await meshStatus(n)).peers.find((p) => p.nodeId === guest.nodeId)).toMatchObject({ standing: "guest", guest: { name: "visitor" } });
  const theirs = await meshStatus(guest);
  expect(theirs.trust).toMatchObject({ state: "guest", name: "visitor" });
  expect(theirs.peers.map((p) => p.standing)).toEqual(["vouched", "vouched"]);
  expect(cli("guests", "--state-dir", a.stateDir)).toMatch(new RegExp(`^visitor  [0-9a-f]{8}  active  no expiry  nodes ${guest.nodeId.slice(0, 10)}`, "m"));
  // A guest's node makes no tokens: only the owner invites.
  const p = Bun.spawnSync([...meshCommand(), "token", "--state-dir", guest.stateDir]);
  expect(p.exitCode).toBe(1);
  expect(p.stderr.toString()).toContain("this node is a guest of its mesh");
});

test("a revoked pass: every node drops its guest within seconds and refuses it when it dials again", async () => {
  expect(cli("guests", "revoke", "visitor", "--state-dir", a.stateDir)).toContain("revoked 1 pass named visitor");
  // A read it from its state dir; B learnt it from A; the guest's own node learnt it too.
  for (const n of [a, b]) await waitFor(async () => !(await peerIdsOf(n)).includes(guest.nodeId), { what: "the revoked guest to be dropped", timeoutMs: 20_000 });
  // The guest's node is told why when it dials again.
  await waitFor(() => guest.child.output().includes("its pass visitor was revoked"), { what: "the guest's node to be told its pass was revoked" });
  // Its node keeps dialing the mesh it lost; each dial is refused at admission, saying why.
  await waitFor(async () => (await refusedBy(a, guest.nodeId)).length >= 1 && (await refusedBy(b, guest.nodeId)).length >= 1, { what: "both to have refused it" });
  expect([...(await refusedBy(a, guest.nodeId)), ...(await refusedBy(b, guest.nodeId))].every((why) => why === "its pass visitor was revoked")).toBe(true);
  expect(cli("guests", "--state-dir", a.stateDir)).toContain("visitor");
  expect(cli("guests", "--state-dir", a.stateDir)).toMatch(/visitor {2}[0-9a-f]{8} {2}revoked/);
  expect(await peerIdsOf(a)).toEqual([b.nodeId]);
});

test("an expired pass: its guest is dropped when it expires, and refused at admission after", async () => {
  const keys = readRosterKeys(a.stateDir)!;
  const expiresAt = Date.now() + 6_000;
  const { pass, passSecret } = issuePass(keys.secret!, "brief", expiresAt);
  const rogue = await RoguePeer.start();
  rogues.push(rogue);
  const token = decodeJoinToken(a.token);
  const claim = ownClaim({ roster: keys.roster, pass, passSecret }, rogue.transport.nodeId);
  const member = await rogue.member(token, claim);
  try {
    // Its handshake is done on its side once a's hello came; a holds it a moment after.
    await waitFor(async () => (await peerIdsOf(a)).includes(rogue.transport.nodeId), { what: "a to hold the guest" });
    expect((await meshStatus(a)).peers.find((p) => p.nodeId === rogue.transport.nodeId)).toMatchObject({ standing: "guest", guest: { name: "brief", expiresAt } });
    await waitFor(async () => !(await peerIdsOf(a)).includes(rogue.transport.nodeId), { what: "the expired guest to be dropped", timeoutMs: 20_000 });
    expect(Date.now()).toBeGreaterThanOrEqual(expiresAt);
    expect(await rogue.tryJoin(token, claim)).toBeNull();
    expect((await refusedBy(a, rogue.transport.nodeId)).some((why) => why.startsWith("its pass brief expired at"))).toBe(true);
  } finally {
    member.close();
  }
});
