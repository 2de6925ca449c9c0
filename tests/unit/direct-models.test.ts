/**
 * Model copies and KV fetches over the direct path: the model protocol over real TLS sockets on
 * loopback (`socketStream`), the direct server's purpose check and per-member caps, and which path a
 * bulk stream takes (`peerStreamOpener`).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { createServer, connect, Socket } from "node:net";
import { join } from "node:path";
import tls from "node:tls";
import { createLog } from "../../base/log.ts";
import { readFrame, StreamKind, writeFrame } from "../../streams/wire.ts";
import { contentIdentity } from "../../models/content-identity.ts";
import { FileHasher } from "../../models/file-hasher.ts";
import { fetchModelFromPeer } from "../../models/peer-fetch.ts";
import { serveModelStream, type ModelLookup } from "../../models/peer-transfer.ts";
import { DIRECT_RETRY_MS, peerStreamOpener } from "../../node/peer-streams.ts";
import { nodeIdOf, nodeSigner, type Signer, type Stream } from "../../mesh/transport.ts";
import { directMac, directStatement, encodeDirectHello, type DirectPurpose } from "../../tunnel/direct-auth.ts";
import { makeDirectIdentity, normalizeFingerprint } from "../../tunnel/direct-identity.ts";
import { connectDirect, startDirectServer, type StreamPurpose } from "../../tunnel/direct.ts";
import { PeerProtocols } from "../../node/peer-protocols.ts";
import { socketStream } from "../../tunnel/socket-stream.ts";
import { sha256, tempDirs } from "../../harness/transfer.ts";
import { waitFor, withDeadline } from "../../harness/wait.ts";

const dirs = tempDirs("mesh-direct-models-");
const secret = new Uint8Array(32).fill(9);
const SERVER = nodeIdOf(randomBytes(32));
const memberKey = randomBytes(32);
const MEMBER = nodeIdOf(memberKey);
const signMember = nodeSigner(memberKey);
/** A hello for `purpose` from `id`: its MAC under `macSecret` for `macPurpose`, signed by `signer`. */
const helloFrom = (id: string, signer: Signer, purpose: DirectPurpose, macPurpose: DirectPurpose = purpose, macSecret: Uint8Array = secret) =>
  encodeDirectHello(id, directMac(macSecret, id, SERVER, cert, macPurpose), signer(directStatement(id, SERVER, cert, macPurpose)), purpose);
const quiet = createLog("text", () => undefined);
/** Connections of each purpose one member may have served at once, as the node registers them. */
const CAPS: Record<StreamPurpose, number> = { model: 4, kv: 2 };
const data = randomBytes(3_000_000);
const src = dirs.fresh("src");
const lookup: ModelLookup = (model) => (model === "tiny" || model === "big" ? { files: [join(src, `${model}.gguf`)] } : undefined);

let server: Awaited<ReturnType<typeof startDirectServer>>;
let cert: string;
const served: string[] = [];
/** The members whose KV connections reached the KV handler. */
const kvServed: string[] = [];
const sockets: Socket[] = [];

beforeAll(async () => {
  writeFileSync(join(src, "tiny.gguf"), data);
  const identity = await makeDirectIdentity();
  cert = identity.certSha256;
  const hasher = new FileHasher();
  server = await startDirectServer({
    identity,
    host: "127.0.0.1",
    selfId: SERVER,
    secret,
    isPeer: (id) => id === MEMBER,
    rpcPort: () => undefined,
    forHost: () => {
      throw new Error("no RPC in these tests");
    },
    streams: new PeerProtocols()
      .register({ name: "model", kind: StreamKind.MODEL, direct: { purpose: "model", perMember: CAPS.model }, serve: (peerId, stream) => (served.push(peerId), serveModelStream(stream, lookup, hasher)) })
      // As the KV holder does: one frame in, one frame out.
      .register({
        name: "kv",
        kind: StreamKind.KV,
        direct: { purpose: "kv", perMember: CAPS.kv },
        serve: async (peerId, stream) => {
          kvServed.push(peerId);
          const ask = await readFrame(stream.recv);
          await writeFrame(stream.send, { miss: `asked ${JSON.stringify(ask)}` });
          await stream.send.finish();
        },
      }),
    log: quiet,
  });
});
afterAll(() => {
  for (const s of sockets) s.destroy();
  server?.close();
  dirs.remove();
});

const target = () => ({ host: "127.0.0.1", port: server.port, certSha256: cert });
const closed = (s: Socket) => new Promise<void>((resolve) => (s.destroyed ? resolve() : s.once("close", () => resolve())));

describe("the model protocol over the direct path", () => {
  test("a member's copy arrives byte for byte, one connection per request", async () => {
    const before = served.length;
    const open = async () => socketStream(await connectDirect(target(), MEMBER, SERVER, secret, signMember, "model"));
    const dest = dirs.fresh("dest");
    const [path] = await fetchModelFromPeer({ model: "tiny", open, destDir: dest, identity: contentIdentity([{ name: "tiny.gguf", size: data.length, sha256: sha256(data) }]) });
    expect(sha256(readFileSync(path!))).toBe(sha256(data));
    // The manifest, then the file.
    expect(served.slice(before)).toEqual([MEMBER, MEMBER]);
  });

  test("a copy of many chunks and flushes (40 MB) arrives whole while the reader is slower than the sender", async () => {
    const big = randomBytes(40_000_000);
    writeFileSync(join(src, "big.gguf"), big);
    // Each read waits a moment: the sender's socket fills and it must wait for the reader.
    const open = async (): Promise<Stream> => {
      const stream = socketStream(await connectDirect(target(), MEMBER, SERVER, secret, signMember, "model"));
      const read = stream.recv.read;
      return { send: stream.send, recv: { ...stream.recv, read: async (buf) => (await Bun.sleep(1), read(buf)) } };
    };
    const [path] = await fetchModelFromPeer({ model: "big", open, destDir: dirs.fresh("big"), identity: contentIdentity([{ name: "big.gguf", size: big.length, sha256: sha256(big) }]) });
    expect(sha256(readFileSync(path!))).toBe(sha256(big));
  }, 60_000);

  test("a node that is not a member to the server (yet) is refused before the copy starts", async () => {
    await expect(connectDirect(target(), "not-yet-a-member", SERVER, secret, signMember, "model")).rejects.toThrow("without taking it");
  });

  test.each([
    ["not JSON", () => Buffer.concat([Buffer.from([0, 0, 0, 5]), Buffer.from("nope!")])],
    ["a frame claiming 4 GiB", () => Buffer.from([0xff, 0xff, 0xff, 0xff, 1, 2, 3])],
    ["an unknown op", () => Buffer.concat([Buffer.from([0, 0, 0, 15]), Buffer.from('{"op":"delete"}')])],
  ])("a member's junk over the direct path (%s) is answered with a refusal; the server serves on", async (_label, junk) => {
    const stream = socketStream(await connectDirect(target(), MEMBER, SERVER, secret, signMember, "model"));
    await stream.send.writeAll(junk());
    const answer = (await withDeadline(readFrame(stream.recv), 10_000, "the refusal")) as { error?: string } | null;
    expect(answer?.error).toContain("bad model request");
    await stream.recv.stop(0);
    const next = socketStream(await connectDirect(target(), MEMBER, SERVER, secret, signMember, "model"));
    await writeFrame(next.send, { op: "manifest", model: "tiny" });
    expect(((await withDeadline(readFrame(next.recv), 10_000, "a manifest")) as { files?: unknown[] }).files).toHaveLength(1);
    await next.recv.stop(0);
  });

  test("an unknown model is refused in the protocol's own words", async () => {
    const stream = socketStream(await connectDirect(target(), MEMBER, SERVER, secret, signMember, "model"));
    await writeFrame(stream.send, { op: "manifest", model: "../../etc/passwd" });
    await stream.send.finish();
    expect(await withDeadline(readFrame(stream.recv), 10_000, "the refusal")).toEqual({ error: 'model "../../etc/passwd" is not on this node' });
    await stream.recv.stop(0);
  });

  test.each([
    ["a proof made for RPC, sent as a model copy's", () => helloFrom(MEMBER, signMember, "model", "rpc")],
    ["a proof made for a model copy, sent as a KV fetch's", () => helloFrom(MEMBER, signMember, "kv", "model")],
    ["a KV fetch's proof from a node that is not a member", () => {
      const stranger = randomBytes(32);
      return helloFrom(nodeIdOf(stranger), nodeSigner(stranger), "kv");
    }],
    ["a model copy's proof from a node that is not a member", () => {
      const stranger = randomBytes(32);
      return helloFrom(nodeIdOf(stranger), nodeSigner(stranger), "model");
    }],
    ["a proof under another secret", () => helloFrom(MEMBER, signMember, "model", "model", new Uint8Array(32))],
    ["a member's id with the mesh's proof, signed by another key (one member speaking as another)", () => helloFrom(MEMBER, nodeSigner(randomBytes(32)), "model")],
    ["an unsigned hello, as nodes before signatures sent", () => {
      const id = Buffer.from(MEMBER);
      return Buffer.concat([Buffer.from([0xff, 0xff, 1, id.length >> 8, id.length & 0xff]), id, directMac(secret, MEMBER, SERVER, cert, "model")]);
    }],
  ])("%s is closed without an answer", async (_label, hello) => {
    const before = served.length;
    const kvBefore = kvServed.length;
    const socket = tls.connect({ host: "127.0.0.1", port: server.port, rejectUnauthorized: false });
    sockets.push(socket);
    socket.on("error", () => undefined);
    await new Promise((r) => socket.once("secureConnect", r));
    expect(normalizeFingerprint(socket.getPeerCertificate().fingerprint256)).toBe(cert);
    socket.write(hello());
    let got = 0;
    socket.on("data", (d: Buffer) => (got += d.length));
    await withDeadline(closed(socket), 10_000, "the node to close the connection");
    expect(got).toBe(0);
    expect(served.length).toBe(before);
    expect(kvServed.length).toBe(kvBefore);
  });

  test("a KV connection goes to the KV handler, not the model one", async () => {
    const before = { model: served.length, kv: kvServed.length };
    const stream = socketStream(await connectDirect(target(), MEMBER, SERVER, secret, signMember, "kv"));
    await writeFrame(stream.send, { chain: ["x"] });
    expect(await withDeadline(readFrame(stream.recv), 10_000, "the KV answer")).toEqual({ miss: 'asked {"chain":["x"]}' });
    await stream.recv.stop(0);
    expect(kvServed.slice(before.kv)).toEqual([MEMBER]);
    expect(served.length).toBe(before.model);
  });

  const servedOf = (purpose: StreamPurpose) => (purpose === "model" ? served : kvServed).length;
  /** One request of `purpose` answered over a fresh connection. */
  async function answered(purpose: StreamPurpose): Promise<boolean> {
    const socket = await connectDirect(target(), MEMBER, SERVER, secret, signMember, purpose);
    sockets.push(socket);
    const stream = socketStream(socket);
    await writeFrame(stream.send, purpose === "model" ? { op: "manifest", model: "tiny" } : { chain: [] });
    await stream.send.finish();
    const answer = (await withDeadline(readFrame(stream.recv), 5_000, "an answer").catch(() => null)) as { files?: unknown[]; miss?: string } | null;
    await stream.recv.stop(0);
    return purpose === "model" ? answer?.files?.length === 1 : answer?.miss !== undefined;
  }

  test.each(["model", "kv"] as const)("one member has at most its cap of %s connections served at once, apart from the other purpose's; its places come back", async (purpose) => {
    const cap = CAPS[purpose];
    const other: StreamPurpose = purpose === "model" ? "kv" : "model";
    // Requests never sent: each holds its place until the serving side's request deadline.
    const before = servedOf(purpose);
    const held = await Promise.all(Array.from({ length: cap }, () => connectDirect(target(), MEMBER, SERVER, secret, signMember, purpose)));
    sockets.push(...held);
    await waitFor(() => servedOf(purpose) === before + cap, { what: "the held connections to be taken" });
    // Over the cap, the connection is refused before it is taken: the peer can fall back.
    await expect(connectDirect(target(), MEMBER, SERVER, secret, signMember, purpose)).rejects.toThrow("without taking it");
    expect(servedOf(purpose)).toBe(before + cap);
    // The other purpose's places are its own.
    expect(await answered(other)).toBe(true);
    for (const s of held) s.destroy();
    await waitFor(() => answered(purpose), { what: `a ${purpose} connection to be served again once the held ones closed` });
  });
});

describe("socketStream", () => {
  async function pair(): Promise<{ a: Socket; b: Socket; close: () => void }> {
    const srv = createServer();
    await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
    const accepted = new Promise<Socket>((r) => srv.once("connection", r));
    const a = connect((srv.address() as { port: number }).port, "127.0.0.1");
    const b = await accepted;
    sockets.push(a, b);
    return { a, b, close: () => (a.destroy(), b.destroy(), srv.close()) };
  }

  test("a peer that takes nothing fails the write at the stall deadline and the socket goes", async () => {
    const { a, b, close } = await pair();
    b.pause();
    const stream = socketStream(a, undefined, 300);
    const big = new Uint8Array(64 * 1024 * 1024);
    const failed = await withDeadline(stream.send.writeAll(big).then(() => undefined, (err: Error) => err), 10_000, "the stalled write to fail");
    expect(failed?.message).toContain("took nothing for 300 ms");
    expect(a.destroyed).toBe(true);
    close();
  });

  test("reads what arrives, early bytes first; the end reads as null; a half-read buffer keeps the rest", async () => {
    const { a, b, close } = await pair();
    const stream = socketStream(b, new Uint8Array([1, 2]));
    a.end(Buffer.from([3, 4, 5]));
    const buf = new Uint8Array(3);
    await stream.recv.readExact(buf);
    expect([...buf]).toEqual([1, 2, 3]);
    const rest = new Uint8Array(8);
    expect(await stream.recv.read(rest)).toBe(2);
    expect([...rest.subarray(0, 2)]).toEqual([4, 5]);
    expect(await withDeadline(stream.recv.read(rest), 5_000, "the end")).toBeNull();
    close();
  });

  test("a connection cut mid-read is an error, not an end", async () => {
    const { a, b, close } = await pair();
    const stream = socketStream(b);
    a.write(Buffer.from([1]));
    a.resetAndDestroy();
    const buf = new Uint8Array(4);
    const err = await withDeadline(stream.recv.readExact(buf).then(() => undefined, (e: Error) => e), 5_000, "the cut");
    expect(err).toBeInstanceOf(Error);
    close();
  });
});

describe("peerStreamOpener: which path a bulk stream takes", () => {
  const meshStream = { send: {}, recv: {} } as Stream;
  function opener(direct: () => Promise<Socket> | undefined) {
    let now = 0;
    const calls = { direct: 0, mesh: 0 };
    const open = peerStreamOpener({
      what: "model copies",
      direct: () => (calls.direct++, direct()),
      mesh: async () => (calls.mesh++, meshStream),
      log: quiet,
      now: () => now,
    });
    return { open, calls, advance: (ms: number) => void (now += ms) };
  }

  test("no direct offer: the mesh connection, and the stream says so", async () => {
    const o = opener(() => undefined);
    expect(await o.open("p")).toEqual({ stream: meshStream, path: "mesh" });
    expect(o.calls).toEqual({ direct: 1, mesh: 1 });
  });

  test("a direct connection: the direct path, and the stream says so", async () => {
    const socket = new Socket();
    const o = opener(() => Promise.resolve(socket));
    const opened = await o.open("p");
    expect(opened?.path).toBe("direct");
    expect(opened?.stream).not.toBe(meshStream);
    expect(o.calls).toEqual({ direct: 1, mesh: 0 });
    socket.destroy();
  });

  test("a failed direct connection: the mesh now, and for a while without trying again; then direct again", async () => {
    const o = opener(() => Promise.reject(new Error("refused")));
    expect(await o.open("p")).toEqual({ stream: meshStream, path: "mesh" });
    o.advance(DIRECT_RETRY_MS - 1);
    expect(await o.open("p")).toEqual({ stream: meshStream, path: "mesh" });
    expect(o.calls).toEqual({ direct: 1, mesh: 2 });
    o.advance(1);
    await o.open("p");
    expect(o.calls).toEqual({ direct: 2, mesh: 3 });
  });
});
