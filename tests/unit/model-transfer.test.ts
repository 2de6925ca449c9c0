import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RecvSide, SendSide, Stream } from "../../mesh/transport.ts";
import { decodePayload, encodeFrame, MAX_CONTROL_MESSAGE, readFrame } from "../../mesh/wire.ts";
import { ModelStore } from "../../models/model-store.ts";
import { arrivalName, FileHasher, isArrivalNameOf, throttledProgress, type TransferProgress } from "../../models/model-transfer.ts";
import { fetchModelFromPeer, serveModelStream, type ModelLookup } from "../../models/peer-transfer.ts";
import { downloadFromUrl } from "../../models/url-download.ts";

const root = mkdtempSync(join(tmpdir(), "mesh-transfer-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let dirs = 0;
const freshDir = (label: string) => {
  const dir = join(root, `${label}-${++dirs}`);
  mkdirSync(dir, { recursive: true });
  return dir;
};
const sha256 = (bytes: Uint8Array) => new Bun.CryptoHasher("sha256").update(bytes).digest("hex");
const partsIn = (dir: string) => (existsSync(join(dir, ".partial")) ? readdirSync(join(dir, ".partial")).filter((f) => f.endsWith(".part")) : []);

// ---------- an in-memory bi-stream with QUIC's finish/reset/stop semantics ----------

/** One direction: what the writer sent and the reader has not taken yet. */
class Pipe {
  chunks: Uint8Array[] = [];
  finished = false;
  resetCode: number | undefined;
  stopCode: number | undefined;
  private waiter: (() => void) | undefined;
  wake() {
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }
  wait() {
    return new Promise<void>((r) => (this.waiter = r));
  }
}

function sendSide(p: Pipe): SendSide {
  return {
    async writeAll(bytes) {
      if (p.stopCode !== undefined) throw new Error(`stopped by peer with code ${p.stopCode}`);
      if (p.finished || p.resetCode !== undefined) throw new Error("write after finish or reset");
      p.chunks.push(bytes.slice());
      p.wake();
    },
    async finish() {
      if (p.resetCode !== undefined) throw new Error("finish after reset");
      p.finished = true;
      p.wake();
    },
    async reset(code) {
      if (p.finished && p.chunks.length === 0) return;
      // A reset drops whatever the reader has not taken yet.
      p.resetCode = code;
      p.chunks = [];
      p.wake();
    },
  };
}

function recvSide(p: Pipe): RecvSide {
  const read = async (buf: Uint8Array): Promise<number | null> => {
    for (;;) {
      if (p.resetCode !== undefined) throw new Error(`reset by peer with code ${p.resetCode}`);
      if (p.stopCode !== undefined) throw new Error("read after stop");
      const head = p.chunks[0];
      if (head) {
        const n = Math.min(buf.length, head.length);
        buf.set(head.subarray(0, n));
        if (n === head.length) p.chunks.shift();
        else p.chunks[0] = head.subarray(n);
        return n;
      }
      if (p.finished) return null;
      await p.wait();
    }
  };
  return {
    read,
    async readExact(buf) {
      for (let off = 0; off < buf.length; ) {
        const n = await read(buf.subarray(off));
        if (n === null) throw new Error("stream ended early");
        off += n;
      }
    },
    async stop(code) {
      if (p.finished && p.chunks.length === 0) return;
      p.stopCode = code;
      p.chunks = [];
      p.wake();
    },
  };
}

function streamPair(): [Stream, Stream] {
  const ab = new Pipe();
  const ba = new Pipe();
  return [
    { send: sendSide(ab), recv: recvSide(ba) },
    { send: sendSide(ba), recv: recvSide(ab) },
  ];
}

/** What the serving side writes, altered on the way: cut after `at` bytes, or one byte flipped there. */
type Fault = { kind: "reset" | "finish" | "flip"; at: number };
function faulty(stream: Stream, fault: Fault): Stream {
  let sent = 0;
  let cut = false;
  const send: SendSide = {
    async writeAll(bytes) {
      if (cut) {
        if (fault.kind === "finish") return;
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

describe("arrival names", () => {
  test.each([
    ["tiny", "whatever.gguf", "model", "tiny.gguf"],
    ["big", "Orig-Q4-00002-of-00003.gguf", "model", "big-00002-of-00003.gguf"],
    ["big", "mmproj-f16.gguf", "projector", "mmproj-big.gguf"],
    ["team/big", "x.gguf", "model", "team/big.gguf"],
    ["team/big", "x.gguf", "projector", "team/mmproj-big.gguf"],
  ] as const)("%s / %s (%s) arrives as %s", (model, file, kind, name) => {
    expect(arrivalName(model, file, kind)).toBe(name);
    expect(isArrivalNameOf(model, name)).toBe(true);
  });
  test.each([
    ["tiny", "other.gguf"],
    ["tiny", "../tiny.gguf"],
    ["tiny", "sub/tiny.gguf"],
    ["tiny", "tiny-1-of-2.gguf"],
    ["tiny", ".partial/tiny.gguf"],
    ["team/big", "big.gguf"],
  ])("%s never arrives as %s", (model, name) => expect(isArrivalNameOf(model, name)).toBe(false));
  test.each(["../x", "a/../../x", ".hidden", "", "a//b"])("model name %p is refused", (model) => {
    expect(() => arrivalName(model, "x.gguf", "model")).toThrow("cannot be used as a file name");
  });
});

describe("fetchModelFromPeer / serveModelStream", () => {
  const src = join(root, "sender");
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
    const paths = await fetchModelFromPeer({ model: "tiny", open: peer.open, destDir: dest, onProgress: (p) => progress.push(p) });
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

  test("a split model with a projector arrives so the scan names it as the sender does", async () => {
    const dest = freshDir("split");
    const paths = await fetchModelFromPeer({ model: "big", open: servingPeer(lookup).open, destDir: dest });
    expect(paths).toEqual(["big-00001-of-00002.gguf", "big-00002-of-00002.gguf", "mmproj-big.gguf"].map((f) => join(dest, f)));
    expect(paths.map((p) => sha256(readFileSync(p)))).toEqual([...shardData, projData].map(sha256));
    const models = await new ModelStore({ modelsDir: dest, extraFiles: [], hasGpu: false }).refresh();
    expect(models.map((m) => [m.name, m.files.length, m.mmproj, m.problem])).toEqual([["big", 2, join(dest, "mmproj-big.gguf"), undefined]]);
  });

  test.each(["reset", "finish"] as const)("a transfer cut by a %s resumes from the part's length", async (kind) => {
    const dest = freshDir(`resume-${kind}`);
    const cut = servingPeer(lookup, () => ({ kind, at: 1_000_000 }));
    await expect(fetchModelFromPeer({ model: "tiny", open: cut.open, destDir: dest })).rejects.toThrow("the partial file is kept");
    await Promise.all(cut.served);
    expect(existsSync(join(dest, "tiny.gguf"))).toBe(false);
    const partLength = statSync(join(dest, ".partial", "tiny.gguf.part")).size;
    // A reset drops what the receiver had not read yet; a finish delivers all of it.
    expect(partLength).toBeGreaterThan(kind === "reset" ? 0 : 900_000);
    expect(partLength).toBeLessThan(1_000_000);

    const whole = servingPeer(lookup);
    const progress: TransferProgress[] = [];
    const paths = await fetchModelFromPeer({ model: "tiny", open: whole.open, destDir: dest, onProgress: (p) => progress.push(p) });
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
    await expect(fetchModelFromPeer({ model: "changing", open: servingPeer(changing, () => ({ kind: "reset", at: 700_000 })).open, destDir: dest })).rejects.toThrow();
    const next = randomBytes(1_500_000);
    writeFileSync(path, next);
    const peer = servingPeer(changing);
    const [got] = await fetchModelFromPeer({ model: "changing", open: peer.open, destDir: dest });
    expect(peer.requests[1]).toMatchObject({ op: "file", offset: 0 });
    expect(Buffer.from(readFileSync(got!)).equals(next)).toBe(true);
  });

  test("a corrupted byte fails the hash: nothing installed, the part removed", async () => {
    const dest = freshDir("corrupt");
    const peer = servingPeer(lookup, () => ({ kind: "flip", at: 1_234_567 }));
    await expect(fetchModelFromPeer({ model: "tiny", open: peer.open, destDir: dest })).rejects.toThrow(/SHA-256 [0-9a-f]{64}, expected [0-9a-f]{64}; the partial file was removed/);
    expect(existsSync(join(dest, "tiny.gguf"))).toBe(false);
    expect(partsIn(dest)).toEqual([]);
  });

  test("an unknown model is a clear error", async () => {
    const dest = freshDir("unknown");
    await expect(fetchModelFromPeer({ model: "nope", open: servingPeer(lookup).open, destDir: dest })).rejects.toThrow('the peer refused model "nope": model "nope" is not on this node');
  });

  test("files already present with the right hash are not fetched again", async () => {
    const dest = freshDir("present");
    writeFileSync(join(dest, "big-00001-of-00002.gguf"), shardData[0]!);
    const peer = servingPeer(lookup);
    const paths = await fetchModelFromPeer({ model: "big", open: peer.open, destDir: dest });
    expect(peer.requests.filter((r) => r.op === "file").map((r) => r.name)).toEqual(["big-00002-of-00002.gguf", "mmproj-big.gguf"]);
    expect(paths.map((p) => sha256(readFileSync(p)))).toEqual([...shardData, projData].map(sha256));
  });

  test("a different file already under an arriving name (another local model's) is never replaced", async () => {
    const dest = freshDir("collide");
    const mine = randomBytes(shardData[1]!.length);
    writeFileSync(join(dest, "big-00002-of-00002.gguf"), mine);
    const peer = servingPeer(lookup);
    await expect(fetchModelFromPeer({ model: "big", open: peer.open, destDir: dest })).rejects.toThrow("is another file; it is not replaced");
    expect(sha256(readFileSync(join(dest, "big-00002-of-00002.gguf")))).toBe(sha256(mine));
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
    await expect(fetchModelFromPeer({ model: "tiny", open: async () => client, destDir: dest })).rejects.toThrow('names "../../evil.gguf", which is not a file of that model');
    await rogue;
  });
});

describe("FileHasher", () => {
  test("caches per file version and notices a change", async () => {
    const path = join(freshDir("hasher"), "f.gguf");
    writeFileSync(path, "a".repeat(1000));
    const hasher = new FileHasher();
    const first = await hasher.digest(path);
    expect(first).toEqual({ size: 1000, sha256: sha256(new TextEncoder().encode("a".repeat(1000))) });
    writeFileSync(path, "b".repeat(1000));
    utimesSync(path, new Date(), new Date(Date.now() + 5000));
    expect((await hasher.digest(path)).sha256).toBe(sha256(new TextEncoder().encode("b".repeat(1000))));
  });
});

describe("throttledProgress", () => {
  test("reports at most every interval, and always the last", () => {
    const seen: TransferProgress[] = [];
    const progress = throttledProgress("m", (p) => seen.push(p), 60_000);
    progress.set({ bytes: 0, total: 1000 });
    for (let i = 0; i < 1000; i++) progress.add(1);
    progress.done();
    expect(seen).toEqual([
      { model: "m", bytes: 0, total: 1000 },
      { model: "m", bytes: 1000, total: 1000 },
    ]);
  });
});

// ---------- URL download ----------

interface Hit {
  path: string;
  range: string | null;
  status: number;
  auth: string | null;
}

/** A file server that honours Range, and can be told to cut bodies, ignore ranges, fail or send etags. */
function fileServer(files: Record<string, Uint8Array>) {
  const state = {
    hits: [] as Hit[],
    /** Cut this many of the next bodies after `cutAt` bytes of each. */
    cuts: 0,
    cutAt: 800_000,
    /** Answer 503 to this many of the next requests. */
    failures: 0,
    /** After the next cut, answer 503 to everything (the server went down). */
    downAfterCut: false,
    ignoreRange: false,
    etag: undefined as string | undefined,
    /** `/resolve/<name>` redirects here with `x-linked-etag`. */
    redirectTo: undefined as string | undefined,
    linkedEtag: undefined as string | undefined,
  };
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req) {
      const url = new URL(req.url);
      const hit = (status: number) => state.hits.push({ path: url.pathname, range: req.headers.get("range"), status, auth: req.headers.get("authorization") });
      if (url.pathname.startsWith("/resolve/")) {
        hit(302);
        const headers: Record<string, string> = { location: `${state.redirectTo}/files/${url.pathname.slice("/resolve/".length)}` };
        if (state.linkedEtag) headers["x-linked-etag"] = `"${state.linkedEtag}"`;
        return new Response(null, { status: 302, headers });
      }
      if (state.failures > 0) {
        state.failures--;
        hit(503);
        return new Response("busy", { status: 503 });
      }
      const data = files[url.pathname.slice("/files/".length)];
      if (!data) {
        hit(404);
        return new Response("no", { status: 404 });
      }
      const headers: Record<string, string> = {};
      if (state.etag) headers.etag = `"${state.etag}"`;
      let start = 0;
      let status = 200;
      const range = /^bytes=(\d+)-$/.exec(req.headers.get("range") ?? "");
      if (range && !state.ignoreRange) {
        start = Number(range[1]);
        if (start >= data.length) {
          hit(416);
          return new Response(null, { status: 416, headers: { ...headers, "content-range": `bytes */${data.length}` } });
        }
        status = 206;
        headers["content-range"] = `bytes ${start}-${data.length - 1}/${data.length}`;
      }
      hit(status);
      const body = data.subarray(start);
      headers["content-length"] = String(body.length);
      if (state.cuts <= 0) return new Response(body, { status, headers });
      state.cuts--;
      if (state.downAfterCut) state.failures = Infinity;
      let sent = false;
      const cutAt = state.cutAt;
      return new Response(
        new ReadableStream({
          // Failing the body drops the connection (an error with no reason keeps the log quiet); the
          // pause lets the client take the first part first, so the cut lands at a known byte.
          async pull(controller) {
            if (sent) {
              await Bun.sleep(20);
              return controller.error();
            }
            sent = true;
            controller.enqueue(body.subarray(0, cutAt));
          },
        }),
        { status, headers },
      );
    },
  });
  return { state, base: `http://127.0.0.1:${server.port}`, stop: () => server.stop(true) };
}

describe("downloadFromUrl", () => {
  const data = randomBytes(2_500_000);
  const files = { "model.gguf": data, "Orig-Q4-00002-of-00003.gguf": data.subarray(0, 1000) };
  const hub = fileServer(files);
  const cdn = fileServer(files);
  afterAll(() => {
    hub.stop();
    cdn.stop();
  });
  const reset = () => {
    for (const s of [hub.state, cdn.state]) Object.assign(s, { hits: [], cuts: 0, failures: 0, downAfterCut: false, ignoreRange: false, etag: undefined, linkedEtag: undefined, redirectTo: cdn.base });
  };
  const download = (dest: string, over: Partial<Parameters<typeof downloadFromUrl>[0]> = {}) =>
    downloadFromUrl({ url: `${hub.base}/files/model.gguf`, model: "m", destDir: dest, retryDelayMs: 5, ...over });

  test("a whole file, not verified when nobody states a hash", async () => {
    reset();
    const dest = freshDir("url-full");
    const progress: TransferProgress[] = [];
    const got = await download(dest, { onProgress: (p) => progress.push(p) });
    expect(got).toEqual({ path: join(dest, "m.gguf"), sha256: sha256(data), verified: false });
    expect(Buffer.from(readFileSync(got.path)).equals(data)).toBe(true);
    expect(progress.at(-1)).toEqual({ model: "m", bytes: data.length, total: data.length });
    expect(partsIn(dest)).toEqual([]);
  });

  test("a given sha256 is checked", async () => {
    reset();
    const got = await download(freshDir("url-sha"), { sha256: sha256(data).toUpperCase() });
    expect(got.verified).toBe(true);
  });

  test("a cut body is resumed with a range (206) within the same call", async () => {
    reset();
    hub.state.cuts = 1;
    const dest = freshDir("url-resume");
    const got = await download(dest);
    expect(hub.state.hits.map((h) => [h.status, h.range])).toEqual([
      [200, null],
      [206, "bytes=800000-"],
    ]);
    expect(Buffer.from(readFileSync(got.path)).equals(data)).toBe(true);
  });

  test("a failed download keeps its part, and the next call asks from the part's length", async () => {
    reset();
    hub.state.cuts = 1;
    hub.state.downAfterCut = true;
    const dest = freshDir("url-next-call");
    await expect(download(dest)).rejects.toThrow("failed 3 times in a row");
    expect(hub.state.hits.map((h) => h.status)).toEqual([200, 503, 503]);
    const partLength = statSync(join(dest, ".partial", "m.gguf.part")).size;
    expect(partLength).toBe(800_000);
    reset();
    const got = await download(dest);
    expect(hub.state.hits.map((h) => [h.status, h.range])).toEqual([[206, `bytes=${partLength}-`]]);
    expect(Buffer.from(readFileSync(got.path)).equals(data)).toBe(true);
  });

  test("a server that ignores the range (200) starts the file over", async () => {
    reset();
    const dest = freshDir("url-ignore-range");
    mkdirSync(join(dest, ".partial"));
    writeFileSync(join(dest, ".partial", "m.gguf.part"), randomBytes(600_000));
    hub.state.ignoreRange = true;
    const got = await download(dest, { sha256: sha256(data) });
    expect(hub.state.hits.map((h) => [h.status, h.range])).toEqual([[200, "bytes=600000-"]]);
    expect(Buffer.from(readFileSync(got.path)).equals(data)).toBe(true);
  });

  test("a wrong sha256 installs nothing and removes the part", async () => {
    reset();
    const dest = freshDir("url-wrong-sha");
    await expect(download(dest, { sha256: "ab".repeat(32) })).rejects.toThrow(`arrived with SHA-256 ${sha256(data)}, expected ${"ab".repeat(32)}`);
    expect(existsSync(join(dest, "m.gguf"))).toBe(false);
    expect(partsIn(dest)).toEqual([]);
  });

  test("an etag that is a sha256 verifies the file, and a wrong one fails it", async () => {
    reset();
    hub.state.etag = sha256(data);
    expect((await download(freshDir("url-etag"))).verified).toBe(true);
    hub.state.etag = "cd".repeat(32);
    await expect(download(freshDir("url-etag-wrong"))).rejects.toThrow("expected cdcd");
    // An etag that is no sha256 (an S3 md5) says nothing about the hash.
    hub.state.etag = "0123456789abcdef0123456789abcdef";
    expect((await download(freshDir("url-etag-md5"))).verified).toBe(false);
  });

  test("a hub redirect's x-linked-etag verifies; credentials stay with the hub", async () => {
    reset();
    hub.state.linkedEtag = sha256(data);
    const got = await download(freshDir("url-linked"), { url: `${hub.base}/resolve/model.gguf`, headers: { Authorization: "Bearer t" } });
    expect(got.verified).toBe(true);
    expect(hub.state.hits.map((h) => h.auth)).toEqual(["Bearer t"]);
    expect(cdn.state.hits.map((h) => [h.path, h.auth])).toEqual([["/files/model.gguf", null]]);
  });

  test("a 503 is tried again; a 404 is not", async () => {
    reset();
    hub.state.failures = 2;
    expect((await download(freshDir("url-503"))).sha256).toBe(sha256(data));
    expect(hub.state.hits.map((h) => h.status)).toEqual([503, 503, 200]);
    reset();
    await expect(download(freshDir("url-404"), { url: `${hub.base}/files/nope.gguf` })).rejects.toThrow("answered 404: no such file");
    expect(hub.state.hits).toHaveLength(1);
  });

  test("a complete part from a run that stopped before the rename is installed (416)", async () => {
    reset();
    const dest = freshDir("url-416");
    mkdirSync(join(dest, ".partial"));
    writeFileSync(join(dest, ".partial", "m.gguf.part"), data);
    const got = await download(dest, { sha256: sha256(data) });
    expect(hub.state.hits.map((h) => h.status)).toEqual([416]);
    expect(got.verified).toBe(true);
  });

  test("a shard keeps its suffix under the model's name", async () => {
    reset();
    const got = await download(freshDir("url-shard"), { url: `${hub.base}/files/Orig-Q4-00002-of-00003.gguf`, model: "big" });
    expect(got.path.endsWith("/big-00002-of-00003.gguf")).toBe(true);
  });
});
