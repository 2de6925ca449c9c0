import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { SendSide, Stream } from "../../mesh/transport.ts";
import { decodePayload, encodeFrame, MAX_CONTROL_MESSAGE, readFrame } from "../../streams/wire.ts";
import { ModelStore } from "../../models/model-store.ts";
import { FileHasher } from "../../models/file-hasher.ts";
import { NotTheContent, type TransferProgress } from "../../models/model-transfer.ts";
import { contentIdentity } from "../../models/content-identity.ts";
import { fetchModelFromPeer } from "../../models/peer-fetch.ts";
import { answerDeadlineMs, filesToServe, serveModelStream, TRANSFER_DEADLINES, type ModelLookup } from "../../models/peer-transfer.ts";
import { drained, streamPair } from "../../harness/stream-pair.ts";
import { partsIn, sha256, tempDirs } from "../../harness/transfer.ts";
import { withDeadline } from "../../harness/wait.ts";

const dirs = tempDirs("mesh-transfer-");
afterAll(dirs.remove);
const freshDir = dirs.fresh;

/** The content identity of a model as `lookup` serves it now: what the mesh would know it by. */
const idFor = (lookup: ModelLookup, model: string) =>
  contentIdentity([...filesToServe(model, lookup(model)!)].map(([name, path]) => ({ name, size: statSync(path).size, sha256: sha256(readFileSync(path)) })));


/**
 * What the serving side writes, altered on the way: cut after `at` bytes, one byte flipped there,
 * or stalled there (nothing more is sent, the stream stays open).
 */
type Fault = { kind: "reset" | "finish" | "flip" | "stall"; at: number };
function faulty(stream: Stream, fault: Fault): Stream {
  let sent = 0;
  let cut = false;
  const send: SendSide = {
    async writeAll(bytes) {
      if (cut) {
        if (fault.kind === "finish") return;
        if (fault.kind === "stall") return new Promise<void>(() => undefined);
        throw new Error("cut");
      }
      const start = sent;
      sent += bytes.length;
      if (sent <= fault.at) return stream.send.writeAll(bytes);
      if (fault.kind === "flip") {
        const copy = bytes.slice();
        if (start <= fault.at) copy[fault.at - start]! ^= 0xff;
        return stream.send.writeAll(copy);
      }
      await stream.send.writeAll(bytes.subarray(0, Math.max(0, fault.at - start)));
      cut = true;
      if (fault.kind === "finish") return stream.send.finish();
      if (fault.kind === "stall") return new Promise<void>(() => undefined);
      // The receiver got what was sent before the cut (a reset drops only what it had not read).
      await drained(stream.send);
      await stream.send.reset(7);
      throw new Error("cut");
    },
    finish: () => (cut ? Promise.resolve() : stream.send.finish()),
    reset: (code) => stream.send.reset(code),
  };
  return { send, recv: stream.recv };
}

/** A peer serving `lookup` from its own hasher; records every request it is sent. */
function servingPeer(lookup: ModelLookup, fault?: () => Fault | undefined) {
  const hasher = new FileHasher();
  const requests: Record<string, unknown>[] = [];
  const served: Promise<void>[] = [];
  const open = async (): Promise<Stream> => {
    const [client, server] = streamPair();
    const f = fault?.();
    served.push(serveModelStream(f ? faulty(server, f) : server, lookup, hasher));
    return {
      recv: client.recv,
      send: {
        ...client.send,
        writeAll: (bytes) => {
          requests.push(decodePayload(bytes.subarray(4)) as Record<string, unknown>);
          return client.send.writeAll(bytes);
        },
      },
    };
  };
  return { open, requests, served };
}

/** Sends raw bytes as a request and returns the first frame of the answer. */
async function rawRequest(bytes: Uint8Array, lookup: ModelLookup): Promise<{ answer: unknown; served: Promise<void> }> {
  const [client, server] = streamPair();
  const served = serveModelStream(server, lookup, new FileHasher());
  await client.send.writeAll(bytes);
  await client.send.finish();
  return { answer: await readFrame(client.recv), served };
}

// ---------- peer transfer ----------

describe("fetchModelFromPeer / serveModelStream", () => {
  const src = freshDir("sender");
  const tinyData = randomBytes(2_600_000);
  const shardData = [randomBytes(1_200_000), randomBytes(900_000)];
  const projData = randomBytes(300_000);
  const files: Record<string, { files: string[]; mmproj?: string }> = {
    tiny: { files: [join(src, "some-file.Q4.gguf")] },
    big: { files: [join(src, "Orig-00001-of-00002.gguf"), join(src, "Orig-00002-of-00002.gguf")], mmproj: join(src, "mmproj-f16.gguf") },
  };
  const lookup: ModelLookup = (model) => files[model];
  beforeAll(() => {
    mkdirSync(src, { recursive: true });
    writeFileSync(files.tiny!.files[0]!, tinyData);
    files.big!.files.forEach((f, i) => writeFileSync(f, shardData[i]!));
    writeFileSync(files.big!.mmproj!, projData);
    // Never served: only files of the asked model leave the node.
    writeFileSync(join(src, "secret.gguf"), "secret");
  });

  test("a whole file arrives byte for byte, named for the model, with throttled progress", async () => {
    const dest = freshDir("whole");
    const peer = servingPeer(lookup);
    const progress: TransferProgress[] = [];
    const paths = await fetchModelFromPeer({ model: "tiny", identity: idFor(lookup, "tiny"), open: peer.open, destDir: dest, onProgress: (p) => progress.push(p) });
    expect(paths).toEqual([join(dest, "tiny.gguf")]);
    expect(sha256(readFileSync(paths[0]!))).toBe(sha256(tinyData));
    expect(partsIn(dest)).toEqual([]);
    expect(progress.at(-1)).toEqual({ model: "tiny", bytes: tinyData.length, total: tinyData.length });
    expect(progress.length).toBeLessThan(5);
    expect(peer.requests).toEqual([
      { op: "manifest", model: "tiny" },
      { op: "file", model: "tiny", name: "tiny.gguf", offset: 0 },
    ]);
    await Promise.all(peer.served);
  });

  test("a split model with a projector arrives so the scan names it as the sender does (the mesh announcing its weights' size, as nodes do)", async () => {
    const dest = freshDir("split");
    const weights = shardData[0]!.length + shardData[1]!.length;
    const paths = await fetchModelFromPeer({ model: "big", identity: idFor(lookup, "big"), open: servingPeer(lookup).open, destDir: dest, expectedBytes: weights });
    expect(paths).toEqual(["big-00001-of-00002.gguf", "big-00002-of-00002.gguf", "mmproj-big.gguf"].map((f) => join(dest, f)));
    expect(paths.map((p) => sha256(readFileSync(p)))).toEqual([...shardData, projData].map(sha256));
    const models = await new ModelStore({ modelsDir: dest, extraFiles: [], hasGpu: false }).refresh();
    expect(models.map((m) => [m.name, m.files.length, m.mmproj, m.problem])).toEqual([["big", 2, join(dest, "mmproj-big.gguf"), undefined]]);
  });

  test.each(["reset", "finish"] as const)("a transfer cut by a %s resumes from the part's length", async (kind) => {
    const dest = freshDir(`resume-${kind}`);
    const cut = servingPeer(lookup, () => ({ kind, at: 1_000_000 }));
    await expect(fetchModelFromPeer({ model: "tiny", identity: idFor(lookup, "tiny"), open: cut.open, destDir: dest })).rejects.toThrow("the partial file is kept");
    await Promise.all(cut.served);
    expect(existsSync(join(dest, "tiny.gguf"))).toBe(false);
    const partLength = statSync(join(dest, ".partial", "tiny.gguf.part")).size;
    // A reset drops what the receiver had not read yet; a finish delivers all of it.
    expect(partLength).toBeGreaterThan(kind === "reset" ? 0 : 900_000);
    expect(partLength).toBeLessThan(1_000_000);

    const whole = servingPeer(lookup);
    const progress: TransferProgress[] = [];
    const paths = await fetchModelFromPeer({ model: "tiny", identity: idFor(lookup, "tiny"), open: whole.open, destDir: dest, onProgress: (p) => progress.push(p) });
    expect(whole.requests[1]).toEqual({ op: "file", model: "tiny", name: "tiny.gguf", offset: partLength });
    expect(Buffer.from(readFileSync(paths[0]!)).equals(tinyData)).toBe(true);
    expect(partsIn(dest)).toEqual([]);
    expect(progress.at(-1)?.bytes).toBe(tinyData.length);
  });

  test("a part of an older version of the file is not resumed", async () => {
    const dir = freshDir("changing-src");
    const path = join(dir, "m.gguf");
    writeFileSync(path, randomBytes(1_500_000));
    const changing: ModelLookup = (model) => (model === "changing" ? { files: [path] } : undefined);
    const dest = freshDir("changing");
    await expect(fetchModelFromPeer({ model: "changing", identity: idFor(changing, "changing"), open: servingPeer(changing, () => ({ kind: "reset", at: 700_000 })).open, destDir: dest })).rejects.toThrow();
    const next = randomBytes(1_500_000);
    writeFileSync(path, next);
    const peer = servingPeer(changing);
    const [got] = await fetchModelFromPeer({ model: "changing", identity: idFor(changing, "changing"), open: peer.open, destDir: dest });
    expect(peer.requests[1]).toMatchObject({ op: "file", offset: 0 });
    expect(Buffer.from(readFileSync(got!)).equals(next)).toBe(true);
  });

  test("a corrupted byte fails the hash: nothing installed, the part removed", async () => {
    const dest = freshDir("corrupt");
    const peer = servingPeer(lookup, () => ({ kind: "flip", at: 1_234_567 }));
    await expect(fetchModelFromPeer({ model: "tiny", identity: idFor(lookup, "tiny"), open: peer.open, destDir: dest })).rejects.toThrow(/SHA-256 [0-9a-f]{64}, expected [0-9a-f]{64}; the partial file was removed/);
    expect(existsSync(join(dest, "tiny.gguf"))).toBe(false);
    expect(partsIn(dest)).toEqual([]);
  });

  test("an unknown model is a clear error", async () => {
    const dest = freshDir("unknown");
    await expect(fetchModelFromPeer({ model: "nope", identity: undefined, open: servingPeer(lookup).open, destDir: dest })).rejects.toThrow('the peer refused model "nope": model "nope" is not on this node');
  });

  test("files mesh copied for the model, already present with the right hash, are not fetched again", async () => {
    const dest = freshDir("present");
    writeFileSync(join(dest, "big-00001-of-00002.gguf"), shardData[0]!);
    writeFileSync(join(dest, "models.json"), JSON.stringify({ big: { file: "big-00001-of-00002.gguf", pulled: true } }));
    const peer = servingPeer(lookup);
    const paths = await fetchModelFromPeer({ model: "big", identity: idFor(lookup, "big"), open: peer.open, destDir: dest });
    expect(peer.requests.filter((r) => r.op === "file").map((r) => r.name)).toEqual(["big-00002-of-00002.gguf", "mmproj-big.gguf"]);
    expect(paths.map((p) => sha256(readFileSync(p)))).toEqual([...shardData, projData].map(sha256));
  });

  test("a different file already under an arriving name (another local model's) is never replaced", async () => {
    const dest = freshDir("collide");
    const mine = randomBytes(shardData[1]!.length);
    writeFileSync(join(dest, "big-00002-of-00002.gguf"), mine);
    const peer = servingPeer(lookup);
    await expect(fetchModelFromPeer({ model: "big", identity: idFor(lookup, "big"), open: peer.open, destDir: dest })).rejects.toThrow("is a file mesh did not copy as \"big\"; it is neither replaced nor taken");
    expect(sha256(readFileSync(join(dest, "big-00002-of-00002.gguf")))).toBe(sha256(mine));
  });

  test.each([
    ["put there by hand", undefined],
    ["named otherwise in models.json", { mine: { file: "tiny.gguf" } }],
    ["another model's copy", { other: { file: "tiny.gguf", pulled: true } }],
  ])("the very bytes under an arriving name, %s: never taken for the copy (a copy may be deleted, that file may not); nothing written", async (_, registry) => {
    const dest = freshDir("same-bytes");
    writeFileSync(join(dest, "tiny.gguf"), tinyData);
    if (registry) writeFileSync(join(dest, "models.json"), JSON.stringify(registry));
    const peer = servingPeer(lookup);
    await expect(fetchModelFromPeer({ model: "tiny", identity: idFor(lookup, "tiny"), open: peer.open, destDir: dest })).rejects.toThrow("is a file mesh did not copy");
    const models = join(dest, "models.json");
    expect(existsSync(models) && readFileSync(models, "utf8").includes('"tiny"')).toBe(false);
    expect(peer.requests.filter((r) => r.op === "file")).toEqual([]);
  });

  test("a copy cut short installs none of its files: what arrived waits as parts, and the next copy installs them all", async () => {
    const dest = freshDir("all-or-none");
    let opened = 0;
    const good = servingPeer(lookup);
    // The manifest, the first shard, then the peer is gone.
    const open = async () => (++opened <= 2 ? good.open() : Promise.reject(new Error("the peer left")));
    await expect(fetchModelFromPeer({ model: "big", identity: idFor(lookup, "big"), open, destDir: dest })).rejects.toThrow("the peer left");
    expect(existsSync(join(dest, "big-00001-of-00002.gguf"))).toBe(false);
    expect(partsIn(dest).length).toBeGreaterThan(0);
    const again = servingPeer(lookup);
    const paths = await fetchModelFromPeer({ model: "big", identity: idFor(lookup, "big"), open: again.open, destDir: dest });
    expect(paths.map((p) => sha256(readFileSync(p)))).toEqual([...shardData, projData].map(sha256));
    expect(again.requests.filter((r) => r.op === "file").map((r) => r.name)).toEqual(["big-00001-of-00002.gguf", "big-00002-of-00002.gguf", "mmproj-big.gguf"]);
  });

  const junk: [string, Uint8Array, string][] = [
    ["not JSON", (() => {
      const f = new Uint8Array(4 + 5);
      new DataView(f.buffer).setUint32(0, 5);
      f.set(new TextEncoder().encode("hello"), 4);
      return f;
    })(), "not JSON"],
    ["an unknown op", encodeFrame({ op: "delete", model: "tiny" }), "bad model request"],
    ["a negative offset", encodeFrame({ op: "file", model: "tiny", name: "tiny.gguf", offset: -1 }), "bad model request"],
    ["a path for a name", encodeFrame({ op: "file", model: "tiny", name: "../sender/secret.gguf", offset: 0 }), 'model "tiny" has no file "../sender/secret.gguf"; its files: tiny.gguf'],
    ["another model's file", encodeFrame({ op: "file", model: "tiny", name: "mmproj-big.gguf", offset: 0 }), "has no file"],
    ["a path for a model", encodeFrame({ op: "manifest", model: "../sender/secret" }), "is not on this node"],
    ["an oversized frame", (() => {
      const f = new Uint8Array(8);
      new DataView(f.buffer).setUint32(0, MAX_CONTROL_MESSAGE + 1);
      return f;
    })(), "over the"],
    ["nothing at all", new Uint8Array(0), "bad model request"],
  ];
  test.each(junk)("%s is answered with an error and the server carries on", async (_, bytes, message) => {
    const { answer, served } = await rawRequest(bytes, lookup);
    expect(answer).toEqual({ error: expect.stringContaining(message) });
    await served;
    const ok = await rawRequest(encodeFrame({ op: "manifest", model: "tiny" }), lookup);
    expect(ok.answer).toEqual({ files: [{ name: "tiny.gguf", size: tinyData.length, sha256: sha256(tinyData) }] });
  });

  test("an offset past the end gets the head alone", async () => {
    const [client, server] = streamPair();
    const served = serveModelStream(server, lookup, new FileHasher());
    await client.send.writeAll(encodeFrame({ op: "file", model: "tiny", name: "tiny.gguf", offset: 10_000_000 }));
    await client.send.finish();
    expect(await readFrame(client.recv)).toEqual({ size: tinyData.length, sha256: sha256(tinyData) });
    expect(await client.recv.read(new Uint8Array(16))).toBeNull();
    await served;
  });

  test("a manifest that names files outside the model is refused", async () => {
    const [client, server] = streamPair();
    const rogue = (async () => {
      await readFrame(server.recv);
      await server.send.writeAll(encodeFrame({ files: [{ name: "../../evil.gguf", size: 1, sha256: "0".repeat(64) }] }));
      await server.send.finish();
    })();
    const dest = freshDir("rogue");
    await expect(fetchModelFromPeer({ model: "tiny", identity: undefined, open: async () => client, destDir: dest })).rejects.toThrow('names "../../evil.gguf", which is not a file of that model');
    await rogue;
  });
});

// ---------- sizes: a peer's list is a claim (issue 27) ----------

describe("what a peer's list of files may have this node write", () => {
  /** A peer that answers each request with the next of `answers` (a manifest, then file heads). */
  function lyingPeer(answers: unknown[]) {
    let i = 0;
    return async (): Promise<Stream> => {
      const [client, server] = streamPair();
      const answer = answers[Math.min(i++, answers.length - 1)];
      void (async () => {
        await readFrame(server.recv);
        await server.send.writeAll(encodeFrame(answer));
        await server.send.finish().catch(() => undefined);
      })();
      return client;
    };
  }
  const sha = "ab".repeat(32);
  const nothingWritten = (dir: string) => expect(readdirSync(dir, { recursive: true }).filter((f) => !String(f).endsWith("/") && statSync(join(dir, String(f))).isFile())).toEqual([]);

  test.each([
    ["500 GB for a model the mesh announced at 2.6 MB", 2_600_000, 500e9, "more than the 2600000 bytes the mesh announced for it"],
    ["more than the disk has free, the model's size not announced", undefined, 2 ** 50, "more than the free space of the models dir less 1 GiB"],
  ])("a manifest listing %s: refused before a byte is written", async (_, announced, size, says) => {
    const dest = freshDir("sizes");
    mkdirSync(dest, { recursive: true });
    const open = lyingPeer([{ files: [{ name: "tiny.gguf", size, sha256: sha }] }]);
    await expect(fetchModelFromPeer({ model: "tiny", identity: contentIdentity([{ name: "tiny.gguf", size, sha256: sha }]), open, destDir: dest, ...(announced ? { expectedBytes: announced } : {}) })).rejects.toThrow(says);
    nothingWritten(dest);
  });

  test.each([
    ["other bytes under the name (its own honest hashes of them)", (id: string) => id],
    ["no identity the mesh agrees on", () => undefined],
  ])("a manifest that is not the content the mesh knows the model by, %s: refused before a byte is written", async (_, known) => {
    const dest = freshDir("content");
    mkdirSync(dest, { recursive: true });
    const open = lyingPeer([{ files: [{ name: "tiny.gguf", size: 1000, sha256: sha }] }]);
    const theirs = contentIdentity([{ name: "tiny.gguf", size: 1000, sha256: "cd".repeat(32) }]);
    const err = await fetchModelFromPeer({ model: "tiny", identity: known(theirs), open, destDir: dest, expectedBytes: 1000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NotTheContent);
    expect((err as Error).message).toContain("nothing was written");
    nothingWritten(dest);
  });

  test("a file's head naming other bytes of the same size after an honest manifest: not the content, none of it taken", async () => {
    const dest = freshDir("sizes");
    mkdirSync(dest, { recursive: true });
    const open = lyingPeer([{ files: [{ name: "tiny.gguf", size: 1000, sha256: sha }] }, { size: 1000, sha256: "cd".repeat(32) }]);
    const err = await fetchModelFromPeer({ model: "tiny", identity: contentIdentity([{ name: "tiny.gguf", size: 1000, sha256: sha }]), open, destDir: dest, expectedBytes: 1000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(NotTheContent);
    expect((err as Error).message).toContain("not the file its list named");
    expect(readdirSync(dest, { recursive: true }).map(String).filter((f) => f.endsWith(".gguf"))).toEqual([]);
  });

  test("a file's head that grows past the bound after an honest manifest: refused, nothing kept", async () => {
    const dest = freshDir("sizes");
    mkdirSync(dest, { recursive: true });
    const open = lyingPeer([{ files: [{ name: "tiny.gguf", size: 1000, sha256: sha }] }, { size: 500e9, sha256: "cd".repeat(32) }]);
    await expect(fetchModelFromPeer({ model: "tiny", identity: contentIdentity([{ name: "tiny.gguf", size: 1000, sha256: sha }]), open, destDir: dest, expectedBytes: 1000 })).rejects.toThrow("is now 500000000000 bytes on the sending node");
    expect(readdirSync(dest, { recursive: true }).map(String).filter((f) => f.endsWith(".gguf"))).toEqual([]);
  });
});

// ---------- deadlines: a peer that goes quiet is given up on (issue 12, hole 10) ----------

describe("a silent or stalling peer is given up on within the deadlines", () => {
  const src = freshDir("deadline-sender");
  const data = randomBytes(1_500_000);
  const path = join(src, "quiet.gguf");
  const lookup: ModelLookup = (model) => (model === "quiet" ? { files: [path] } : undefined);
  beforeAll(() => writeFileSync(path, data));
  const fast = { requestMs: 300, answerMs: 300, hashMsPerByte: 0, maxAnswerMs: 300, idleMs: 300 };
  /** Bounds the whole attempt: without deadlines in the fetcher it would hang here. */
  const attempt = (p: Promise<unknown>) => withDeadline(p.then(() => "done", (err: Error) => err.message), 10_000, "the fetch to give up");

  test("a member that never answers the manifest request", async () => {
    const t0 = performance.now();
    const [client] = streamPair();
    const why = await attempt(fetchModelFromPeer({ model: "quiet", identity: idFor(lookup, "quiet"), open: async () => client, destDir: freshDir("silent"), deadlines: fast }));
    expect(why).toBe('the peer did not send its answer to the manifest request for "quiet" within 300 ms; gave up on it');
    expect(performance.now() - t0).toBeLessThan(5_000);
  });

  test("a member that answers the manifest, then never sends the file", async () => {
    const good = servingPeer(lookup);
    let opened = 0;
    const open = async () => (++opened === 1 ? good.open() : streamPair()[0]);
    const why = await attempt(fetchModelFromPeer({ model: "quiet", identity: idFor(lookup, "quiet"), open, destDir: freshDir("no-file"), deadlines: fast }));
    expect(why).toBe('the peer did not send its answer to the file request for "quiet" within 300 ms; gave up on it');
  });

  test("a member that drips its answer a byte at a time is held to the whole answer's deadline", async () => {
    const [client, server] = streamPair();
    let dripping = true;
    const drip = (async () => {
      await readFrame(server.recv);
      const frame = encodeFrame({ files: [{ name: "quiet.gguf", size: data.length, sha256: sha256(data) }] });
      for (let i = 0; i < frame.length && dripping; i++) {
        await server.send.writeAll(frame.subarray(i, i + 1));
        await Bun.sleep(50);
      }
    })();
    const why = await attempt(fetchModelFromPeer({ model: "quiet", identity: idFor(lookup, "quiet"), open: async () => client, destDir: freshDir("drip"), deadlines: { ...fast, idleMs: 10_000 } }));
    dripping = false;
    await drip.catch(() => undefined);
    expect(why).toContain("did not send its answer to the manifest request");
  });

  test("a member that stops mid-file: the part is kept and the next peer resumes from it", async () => {
    const dest = freshDir("stall");
    const stalling = servingPeer(lookup, () => ({ kind: "stall", at: 700_000 }));
    const why = await attempt(fetchModelFromPeer({ model: "quiet", identity: idFor(lookup, "quiet"), open: stalling.open, destDir: dest, deadlines: fast }));
    expect(why).toContain("the transfer of quiet.gguf broke (the peer sent nothing for 300 ms; gave up on it)");
    expect(why).toContain("the partial file is kept");
    const part = statSync(join(dest, ".partial", "quiet.gguf.part")).size;
    expect(part).toBeGreaterThan(0);
    const next = servingPeer(lookup);
    const [got] = await fetchModelFromPeer({ model: "quiet", identity: idFor(lookup, "quiet"), open: next.open, destDir: dest, deadlines: fast });
    expect(next.requests[1]).toEqual({ op: "file", model: "quiet", name: "quiet.gguf", offset: part });
    expect(sha256(readFileSync(got!))).toBe(sha256(data));
  });

  test("a member that opens a MODEL stream and never sends its request: the serving side gives up", async () => {
    const [client, server] = streamPair();
    const served = serveModelStream(server, lookup, new FileHasher(), { requestMs: 300 });
    expect(await withDeadline(served.then(() => "served"), 10_000, "the server to give up")).toBe("served");
    expect(await readFrame(client.recv)).toEqual({ error: "bad model request: the peer did not send its request within 300 ms; gave up on it" });
  });

  test.each([
    ["nothing to hash", 0, 30_000],
    ["a 1 GiB file at 50 MiB/s", 2 ** 30, 30_000 + 20_480],
    ["a size not known: the longest wait", undefined, 15 * 60_000],
    ["a huge file: capped", 2 ** 45, 15 * 60_000],
  ] as const)("the wait for an answer: %s", (_, bytes, ms) => expect(answerDeadlineMs(bytes, TRANSFER_DEADLINES)).toBe(ms));
});
