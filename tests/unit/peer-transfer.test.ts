import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { RecvSide, SendSide, Stream } from "../../mesh/transport.ts";
import { decodePayload, encodeFrame, MAX_CONTROL_MESSAGE, readFrame } from "../../mesh/wire.ts";
import { ModelStore } from "../../models/model-store.ts";
import { FileHasher, type TransferProgress } from "../../models/model-transfer.ts";
import { fetchModelFromPeer, serveModelStream, type ModelLookup } from "../../models/peer-transfer.ts";
import { partsIn, sha256, tempDirs } from "../helpers/transfer.ts";

const dirs = tempDirs("mesh-transfer-");
afterAll(dirs.remove);
const freshDir = dirs.fresh;


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
