/**
 * Issue 42, a guest against the owner's machines. Vouched A serves tiny; vouched B (the owner's
 * token, no files) joins; a guest built from our own modules joins both with a pass from `mesh
 * token --guest` and claims what would take the model and its clients' prompts: a terabyte of
 * memory, serving and hosting tiny with an idle queue, tiny idle, another content identity for it,
 * a fetch of it, then pressed demand. Nothing of it is acted on: A keeps its server, A's and B's
 * clients are answered by A, no HTTP, KV, RPC or copy stream reaches the guest, the content is not
 * contested and B copies A's bytes. The guest keeps inference for itself but loads, unloads and
 * asks nothing else; names no member that is dialed; a copied vouch and a pass of another roster
 * are refused. Last, A is killed: B's clients get a clear 503 or B's own answer, never the guest.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { loaded, post, server } from "../../harness/api.ts";
import { killAllChildren } from "../../harness/children.ts";
import { meshStatus, startMeshNode, waitForFullMesh, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { meshCommand, SMALL_LLAMA } from "../../harness/node.ts";
import { rogueHttp } from "../../harness/rogue-http.ts";
import { RoguePeer, type RogueMembership } from "../../harness/rogue-peer.ts";
import { identityKnown } from "../../harness/slot-files.ts";
import { waitFor, withDeadline } from "../../harness/wait.ts";
import { decodeJoinToken, type JoinToken } from "../../mesh/join-token.ts";
import { issuePass, newSecretKey, ownClaim, publicKeyOf, revokePass } from "../../mesh/roster.ts";
import { Transport } from "../../mesh/transport.ts";
import { encodeFrame, readFrame, StreamKind } from "../../streams/wire.ts";
import { connectDirect } from "../../tunnel/direct.ts";
import { TEST_LINE } from "../../harness/node.ts";
import { KEEP_ALIVE_HEADER, KV_FROM_HEADER, ANSWERED_BY_HEADER } from "../../mesh/mesh-headers.ts";

const TINY = "tiny-q8_0";
const OTHER = "tiny-f32";
let a: MeshTestNode;
let b: MeshTestNode;
let rogue: RoguePeer;
let onA: RogueMembership;
let onB: RogueMembership;
let guest: JoinToken;
let identity: string;
let serverPid: number;

/** `mesh token --guest` on the owner's machine `node`. */
function guestToken(node: MeshTestNode, name: string): string {
  const p = Bun.spawnSync([...meshCommand(), "token", "--guest", "--name", name, "--state-dir", node.stateDir]);
  if (p.exitCode !== 0) throw new Error(`mesh token --guest: ${p.stderr.toString()}`);
  return p.stdout.toString().trim();
}

beforeAll(async () => {
  const [tiny, other] = await Promise.all([testModel("tiny", "q8_0"), testModel("tiny", "f32")]);
  [a, rogue] = await Promise.all([startMeshNode([...SMALL_LLAMA, "--model", TINY], { models: { [`${TINY}.gguf`]: tiny, [`${OTHER}.gguf`]: other } }), RoguePeer.start()]);
  serverPid = (await server(a, TINY)).pid;
  identity = await identityKnown(a, TINY);
  // B asks for tiny: it joins tiny's group (and copies it), leaving A's other model to A.
  b = await startMeshNode([...SMALL_LLAMA, "--join", a.token, "--model", TINY]);
  await waitForFullMesh([a, b]);
  guest = decodeJoinToken(guestToken(a, "mallory"));
  onA = await rogue.member(guest);
  onB = await rogue.member({ ...guest, addr: decodeJoinToken(b.token).addr });
  onA.recordStreams();
  onB.recordStreams();
  // Both see it for what its pass says it is.
  for (const n of [a, b]) {
    await waitFor(async () => (await meshStatus(n)).peers.find((p) => p.nodeId === rogue.transport.nodeId)?.guest?.name === "mallory", { what: "the guest to be seen as one" });
  }
  const need = (await waitFor(() => onA.announcement?.modelsOnDisk.find((m) => m.name === TINY), { what: "A to announce tiny" })).need;
  for (const m of [onA, onB]) {
    Object.assign(m.mine, {
      role: "host",
      vramBytes: 2 ** 40,
      assigned: TINY,
      hosting: true,
      serving: [TINY],
      idle: [TINY],
      modelsOnDisk: [{ name: TINY, size: 1, need, identity: "ab".repeat(32) }],
      fetching: { model: TINY, bytes: 1, total: 2, from: "https://example.org/tiny.gguf" },
      demand: [{ model: TINY, slots: 64, inFlight: 0, queued: 0, waitMs: 0 }],
      takesReplicas: true,
      rpcProtocol: onA.announcement!.rpcProtocol,
    });
  }
  // The claims have reached both: each lists the guest as serving tiny.
  for (const n of [a, b]) await waitFor(async () => (await meshStatus(n)).peers.some((p) => p.nodeId === rogue.transport.nodeId && p.serving.includes(TINY)), { what: "the guest's claims to arrive" });
}, 240_000);

afterAll(async () => {
  onA?.close();
  onB?.close();
  await Promise.all([a?.stop(), b?.stop(), rogue?.close()]);
  await killAllChildren();
});

interface Listed {
  id: string;
  mesh?: { host: string | null; servers: string[]; content_sha256: string | null; content_holders: string[]; contested: boolean };
}
const listed = async (n: MeshTestNode) => ((await (await fetch(`${n.url}/v1/models`)).json()) as { data: Listed[] }).data.find((m) => m.id === TINY);
const toGuest = (kinds: readonly number[]) => kinds.filter((k) => k === StreamKind.HTTP || k === StreamKind.KV || k === StreamKind.RPC || k === StreamKind.MODEL);

test("the guest's claims decide nothing: A stays host, its server keeps running, the content is A's and not contested", async () => {
  for (const n of [a, b]) {
    const m = (await listed(n))!;
    expect(m.mesh!.host).toBe(a.nodeId);
    expect(m.mesh!.servers).not.toContain(rogue.transport.nodeId);
    expect(m.mesh!.content_sha256).toBe(identity);
    expect(m.mesh!.contested).toBe(false);
  }
  expect((await server(a, TINY)).pid).toBe(serverPid);
  expect(a.child.output()).not.toContain("another node hosts the model now; unloading ours");
  // Where people look: the guest's claim is named, and said to serve nobody here.
  const status = Bun.spawnSync([...meshCommand(), "status", "--port", String(b.port), "--state-dir", b.stateDir]).stdout.toString();
  expect(status).toContain("trust    vouched");
  expect(status).toContain(`guest mallory (no expiry) (${rogue.transport.nodeId.slice(0, 10)}) claims to serve ${TINY}: not used for this node's clients`);
  expect(status).toContain(`host ${a.nodeId.slice(0, 10)} (vouched)`);
});

test("A's and B's clients are answered by A only; no HTTP, KV, RPC or copy stream reaches the guest", async () => {
  for (const n of [a, b]) {
    for (let i = 0; i < 4; i++) {
      const res = await post(n, "/v1/chat/completions", { model: TINY, user: `client-${i}`, messages: [{ role: "user", content: `a secret prompt ${i}` }], max_tokens: 2 });
      expect(res.status).toBe(200);
      expect(res.headers.get(ANSWERED_BY_HEADER)).toBe(a.nodeId);
      await res.arrayBuffer();
    }
  }
  expect(toGuest(onA.streamsFromNode)).toEqual([]);
  expect(toGuest(onB.streamsFromNode)).toEqual([]);
});

test("B copies A's bytes, never the guest's: it comes to hold the content A holds", async () => {
  await waitFor(async () => (await listed(a))?.mesh?.content_holders.includes(b.nodeId), { what: "B to hold tiny's content", timeoutMs: 90_000 });
  expect((await listed(b))!.mesh!.content_sha256).toBe(identity);
  expect(toGuest(onB.streamsFromNode)).toEqual([]);
});

test("pressed demand from the guest takes no replica anywhere", async () => {
  for (const m of [onA, onB]) m.mine.demand = [{ model: TINY, slots: 1, inFlight: 1, queued: 50, waitMs: 60_000 }];
  // Three of B's heartbeats after the guest's next one: B has read the pressure by then.
  const heard = onB.heard;
  await waitFor(() => onB.heard >= heard + 3, { what: "three heartbeats of B" });
  for (const n of [a, b]) expect(n.child.output()).not.toContain("adding a replica");
  expect((await loaded(b)).filter((s) => s.model_name === TINY)).toEqual([]);
});

test("the guest keeps inference through A, but its keep_alive 0 unloads nothing and it loads nothing on demand", async () => {
  const chat = (model: string, headers: Record<string, string> = {}) =>
    rogueHttp(onA, { method: "POST", path: "/v1/chat/completions", headers, body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }], max_tokens: 2 }) });
  const answered = await chat(TINY, { [KEEP_ALIVE_HEADER]: "0" });
  expect("status" in answered && answered.status).toBe(200);
  // One more answered request after it: had the 0 begun an unload, this one would have loaded tiny again.
  expect((await chat(TINY)).valueOf()).toMatchObject({ status: 200 });
  expect((await server(a, TINY)).pid).toBe(serverPid);
  expect(a.child.output()).not.toMatch(new RegExp(`unloading model model=${TINY} `));
  // A model A has on disk but does not run: a guest's request loads nothing beside tiny.
  const other = await chat(OTHER);
  expect("status" in other && other.status).toBe(503);
  expect("body" in other && other.body).toContain("loads models on demand only for its owner's machines");
  expect((await loaded(a)).map((s) => s.model_name)).toEqual([TINY]);
});

test("the guest's KV ask is a miss, and its RPC stream is refused before rpc-server", async () => {
  const stream = await onA.openStream(StreamKind.KV);
  await stream.send.writeAll(encodeFrame({ identity, build: onA.announcement!.llamaBuild, chain: ["0".repeat(32)] }));
  await stream.send.finish();
  expect(await withDeadline(readFrame(stream.recv), 30_000, "A's KV answer")).toEqual({ miss: "a guest of this mesh gets no KV from the owner's machines" });
  // Claiming tiny's very content, it forwards a chat naming itself as the conversation's last server: A asks it nothing.
  onA.mine.modelsOnDisk = [{ ...onA.mine.modelsOnDisk[0]!, identity }];
  const heard = onA.heard;
  await waitFor(() => onA.heard >= heard + 2, { what: "two heartbeats of A after the claim" });
  const prompt = Array.from({ length: 60 }, (_, i) => ["harbor", "lantern", "delta", "gamma"][i % 4]).join(" ");
  const named = await rogueHttp(onA, { method: "POST", path: "/v1/completions", headers: { [KV_FROM_HEADER]: rogue.transport.nodeId }, body: JSON.stringify({ model: TINY, prompt, max_tokens: 1 }) });
  expect("status" in named && named.status).toBe(200);
  expect(toGuest(onA.streamsFromNode)).toEqual([]);
  const rpc = await onA.openStream(StreamKind.RPC);
  await rpc.send.writeAll(Uint8Array.of(0)).catch(() => undefined);
  const ended = await withDeadline(
    rpc.recv.read(new Uint8Array(16)).then(
      (n) => (n === null ? "finished" : "bytes"),
      () => "reset",
    ),
    30_000,
    "A to refuse the RPC stream",
  );
  expect(ended).toBe("reset");
  await waitFor(() => a.child.output().includes("refused an rpc session of a guest of the mesh"), { what: "A to say so" });
  // Over A's direct TLS path, with the guest's own proof for RPC: the connection is closed before rpc-server.
  const offer = onA.announcement!.signedDirect!;
  const direct = await connectDirect({ host: "127.0.0.1", port: offer.port, certSha256: offer.certSha256 }, rogue.transport.nodeId, a.nodeId, guest.secret, rogue.sign, "rpc");
  const closed = new Promise<string>((resolve) => direct.once("close", () => resolve("closed")));
  direct.on("error", () => undefined);
  direct.write(Uint8Array.of(0, 1, 0, 0, 0, 0, 0, 0, 0));
  expect(await withDeadline(closed, 10_000, "A to close the guest's direct RPC connection (a member's stays open: rpc-server waits for the rest)")).toBe("closed");
});

test("a member the guest names is not dialed", async () => {
  let dialed = 0;
  const trap = await Transport.bind({ secretKey: Uint8Array.from(randomBytes(32)), ipv4Addr: "127.0.0.1:0", ipv6Addr: "[::1]:0", relay: "disabled", line: TEST_LINE, onConnection: (c) => (dialed++, c.close(0, "trap")) });
  try {
    const addr = trap.addr();
    await onA.sendMembers([addr]);
    await onB.sendMembers([addr]);
    const heard = onA.heard;
    await waitFor(() => onA.heard >= heard + 3, { what: "three heartbeats of A" });
    expect(dialed).toBe(0);
    expect(a.child.output()).not.toContain(addr.nodeId.slice(0, 10));
  } finally {
    await trap.close();
  }
});

test("a copy of A's vouch, and a pass another roster signed, are refused at admission, saying why", async () => {
  const copier = await RoguePeer.start();
  try {
    const vouch = onA.announcement!.trust!;
    expect(vouch.vouch).toBeDefined();
    expect(await copier.tryJoin(guest, vouch)).toBeNull();
    const other = newSecretKey();
    const forged = issuePass(other, "mallory", undefined);
    const claim = ownClaim({ roster: guest.roster!.kind === "guest" ? guest.roster!.roster : "", pass: forged.pass, passSecret: forged.passSecret }, copier.transport.nodeId);
    expect(await copier.tryJoin(guest, claim)).toBeNull();
    const foreign = ownClaim({ roster: publicKeyOf(other), secret: other }, copier.transport.nodeId);
    expect(await copier.tryJoin(guest, foreign)).toBeNull();
    const refused = (await meshStatus(a)).refused ?? [];
    const whys = refused.filter((r) => r.nodeId === copier.transport.nodeId).map((r) => r.why);
    expect(whys.some((w) => w.includes("copied vouch proves nothing"))).toBe(true);
    expect(whys.some((w) => w.includes("not signed by this mesh's roster"))).toBe(true);
    expect(whys.some((w) => w.includes("another roster"))).toBe(true);
  } finally {
    await copier.close();
  }
});

test("a guest that swaps its pass for a copy of A's vouch mid-session is dropped; one that gossips a revocation the roster did not sign is dropped as junk", async () => {
  const [swapper, gossiper] = await Promise.all([RoguePeer.start(), RoguePeer.start()]);
  try {
    const s = await swapper.member(guest);
    // Admitted first (the rogue hears A's hello a moment before A holds it as a peer), then the swap.
    await waitFor(async () => (await meshStatus(a)).peers.some((p) => p.nodeId === swapper.transport.nodeId), { what: "A to admit the swapper" });
    s.mine.trust = onA.announcement!.trust!;
    await waitFor(async () => !(await meshStatus(a)).peers.some((p) => p.nodeId === swapper.transport.nodeId), { what: "A to drop the swapper" });
    expect(((await meshStatus(a)).refused ?? []).some((r) => r.nodeId === swapper.transport.nodeId && r.why.includes("copied vouch proves nothing"))).toBe(true);
    const g = await gossiper.member(guest);
    const forged = revokePass(newSecretKey(), guest.roster!.kind === "guest" ? guest.roster!.pass.id : "", Date.now());
    await g.sendStatements([forged]);
    expect(await withDeadline(g.conn.closed, 30_000, "A to hang up on the gossiper")).toContain("the roster did not sign");
    // Nothing it sent was taken: the guest's own pass still stands.
    expect((await meshStatus(a)).peers.find((p) => p.nodeId === rogue.transport.nodeId)?.guest?.name).toBe("mallory");
  } finally {
    await Promise.all([swapper.close(), gossiper.close()]);
  }
});

test("A killed: B's clients get a clear 503 or B's own answer, never the guest", async () => {
  a.child.proc.kill("SIGKILL");
  const answers: { status: number; by: string | null; body: string }[] = [];
  // B's clients ask until B answers them itself (its copy, loaded as the group's host now).
  await waitFor(
    async () => {
      const res = await post(b, "/v1/chat/completions", { model: TINY, messages: [{ role: "user", content: "after" }], max_tokens: 2 }, { signal: AbortSignal.timeout(60_000) });
      answers.push({ status: res.status, by: res.headers.get(ANSWERED_BY_HEADER), body: await res.text() });
      return res.status === 200;
    },
    { what: "B to answer its clients itself", timeoutMs: 90_000, intervalMs: 500 },
  );
  for (const x of answers) {
    if (x.status === 200) expect(x.by).toBe(b.nodeId);
    else expect([x.status, /tiny-q8_0|the node serving this model/.test(x.body)]).toEqual([503, true]);
  }
  expect(toGuest(onB.streamsFromNode)).toEqual([]);
});
