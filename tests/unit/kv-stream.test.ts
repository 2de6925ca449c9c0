/**
 * The KV stream between two members, both ends our own modules over an in-memory stream: a holder
 * (`KvHolder`) with real saved slot files, and an asker (`KvFollow.fetchFrom`) that keeps what it
 * receives in a real slot folder. What a member may get, and what an asker takes from a member
 * that lies, as tables of cases; none needs a llama-server (the e2e test restores a fetched cache).
 */
import { afterEach, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { slotFile } from "../../harness/slot-file-fixture.ts";
import { streamPair } from "../../harness/stream-pair.ts";
import { waitFor } from "../../harness/wait.ts";
import { KvFollow } from "../../kv/kv-follow.ts";
import { KV_ASK_REFILL_MS, KV_ASKS_BURST, KvHolder } from "../../kv/kv-holder.ts";
import { UNMEASURED_PREFILL_TPS } from "../../kv/fetch-decision.ts";
import { maxSlotBytes, type KvShape } from "../../kv/kv-shape.ts";
import { chainOf } from "../../kv/prefix-chain.ts";
import type { KvAnswer } from "../../kv/kv-wire.ts";
import { bytesSource, slotLayout } from "../../kv/slot-layout.ts";
import { createLog } from "../../base/log.ts";
import { SlotCache } from "../../pool/slot-cache.ts";
import type { Stream } from "../../streams/stream.ts";
import { readFrame, writeFrame } from "../../streams/wire.ts";
import { servesContent } from "../../node/kv-parts.ts";

const BUILD = "b7000";
const ID = "a".repeat(64);
const ASKER = "1".repeat(64);
const HOLDER = "2".repeat(64);
const log = createLog("text", () => undefined);
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A node's slot cache in a temporary state dir, and its folder for the test model's content. */
function cacheOf(): { slots: SlotCache; dir: string } {
  const root = mkdtempSync(join(tmpdir(), "kv-stream-"));
  dirs.push(root);
  const dir = join(root, BUILD, ID);
  mkdirSync(dir, { recursive: true });
  return { slots: new SlotCache({ root, build: BUILD, budgetBytes: 1 << 30, identityOf: () => ID, log }), dir };
}

/** The holder's saved conversation: 260 tokens (100, 101, ...): four whole blocks, of which it offers three. */
async function holderWithFile(o: { serves?: boolean; build?: string } = {}) {
  const { slots, dir } = cacheOf();
  const temp = join(dir, "saving-0.bin");
  writeFileSync(temp, slotFile(260));
  const saved = await slots.adopt(dir, temp);
  const holder = new KvHolder({
    build: o.build ?? BUILD,
    savedOf: async (identity) => (identity === ID ? slots.savedOf(identity) : undefined),
    intact: (path) => slots.intact(path),
    servesContent: () => o.serves ?? true,
    // Slow reading: fetching wins whenever there is something to fetch.
    prefillTps: () => 100,
    log,
  });
  return { holder, path: saved.path };
}

/** An asker whose one KV stream is `stream`. */
function askerOver(stream: Stream, o: { build?: string; maxBytes?: number; mayHold?: boolean; keeps?: boolean; shape?: KvShape } = {}) {
  const { slots, dir } = cacheOf();
  const follow = new KvFollow({ build: o.build ?? BUILD, open: async () => stream, mayHold: () => o.mayHold ?? true, keeps: () => o.keeps ?? true, slots, maxBytes: o.maxBytes ?? 1 << 30, ...(o.shape ? { shapeOf: () => o.shape } : {}), log });
  return { follow, dir, slots, fetch: (tokens: Int32Array) => follow.fetchFrom(HOLDER, dir, ID, tokens) };
}

/** A prompt of `n` tokens that is the holder's conversation up to `sameUntil`. */
const prompt = (n: number, sameUntil: number) => Int32Array.from({ length: n }, (_, i) => (i < sameUntil ? 100 + i : 9_000 + i));

const filesIn = (dir: string) => readdirSync(dir).sort();

describe("a member asks the holder", () => {
  test("it gets the whole blocks its prompt shares, cut to them, checked, and kept as a saved slot", async () => {
    const { holder } = await holderWithFile();
    const [a, h] = streamPair();
    const asker = askerOver(a);
    const [got] = await Promise.all([asker.fetch(prompt(250, 195)), holder.serve(ASKER, h)]);
    expect(got?.tokens).toBe(192);
    const layout = slotLayout(bytesSource(new Uint8Array(readFileSync(got!.path))));
    expect([...layout.tokens]).toEqual(Array.from({ length: 192 }, (_, i) => 100 + i));
    // The file llama-server would have written for those 192 tokens, byte for byte.
    expect(new Uint8Array(readFileSync(got!.path))).toEqual(slotFile(192));
    expect(filesIn(asker.dir).filter((n) => n.startsWith("saving-"))).toEqual([]);
    expect(holder.counters).toMatchObject({ offered: 1, sent: 1, sentBytes: got!.bytes });
    expect(asker.follow.counters).toMatchObject({ misses: 0, declined: 0 });
  });

  test.each<[string, { serves?: boolean }, { build?: string }, Int32Array, RegExp]>([
    ["a member that does not announce a model of that content", { serves: false }, {}, prompt(250, 250), /do not announce/],
    ["a member of another llama.cpp build", {}, { build: "b6999" }, prompt(250, 250), /another llama.cpp build/],
    ["a prompt that shares one block only", {}, {}, prompt(250, 70), /wholly within that prompt/],
    // Two of the conversation's three whole blocks: a part of it says nothing, the same miss as none.
    ["a prompt that shares two of its three blocks (a guess at its end)", {}, {}, prompt(250, 140), /wholly within that prompt/],
    ["a prompt that shares none of it", {}, {}, prompt(250, 0), /wholly within that prompt/],
  ])("%s gets a miss, and nothing is sent", async (_, holderOpts, askerOpts, tokens, why) => {
    const { holder } = await holderWithFile(holderOpts);
    const [a, h] = streamPair();
    const lines: string[] = [];
    const { slots, dir } = cacheOf();
    const follow = new KvFollow({ build: askerOpts.build ?? BUILD, open: async () => a, mayHold: () => true, keeps: () => true, slots, maxBytes: 1 << 30, log: createLog("text", (l) => lines.push(l)) });
    const [got] = await Promise.all([follow.fetchFrom(HOLDER, dir, ID, tokens), holder.serve(ASKER, h)]);
    expect(got).toBeUndefined();
    expect(follow.counters.misses).toBe(1);
    expect(holder.counters).toMatchObject({ sent: 0, missed: 1 });
    expect(lines.join("\n")).toMatch(why);
    expect(filesIn(dir)).toEqual([]);
  });

  test(`a member's asks beyond ${KV_ASKS_BURST} at once are told to wait; its next one a second later is answered`, async () => {
    const { holder } = await holderWithFile();
    const ask = async () => {
      const [a, h] = streamPair();
      const served = holder.serve(ASKER, h);
      await writeFrame(a.send, { identity: ID, build: BUILD, chain: chainOf(prompt(250, 0)) });
      const answer = (await readFrame(a.recv)) as KvAnswer;
      await served;
      return "miss" in answer ? answer.miss : "offer";
    };
    const answers: string[] = [];
    for (let i = 0; i <= KV_ASKS_BURST; i++) answers.push(await ask());
    expect(answers.slice(0, KV_ASKS_BURST).every((m) => m.includes("wholly within"))).toBe(true);
    expect(answers[KV_ASKS_BURST]).toContain("too many asks");
    await Bun.sleep(KV_ASK_REFILL_MS + 50);
    expect(await ask()).toContain("wholly within");
  });

  test("from a member that is not one of the owner's machines, a cache is held for its one restore: never a saved slot, never offered, gone once discarded", async () => {
    const { holder } = await holderWithFile();
    const [a, h] = streamPair();
    const asker = askerOver(a, { keeps: false });
    const [got] = await Promise.all([asker.fetch(prompt(250, 195)), holder.serve(ASKER, h)]);
    expect(got).toMatchObject({ tokens: 192, kept: false });
    // Under its temporary name with its size and hash beside it (llama-server's restore checks them): no saved slot.
    expect(filesIn(asker.dir).every((f) => f.startsWith("saving-fetch-"))).toBe(true);
    expect(asker.slots.savedOf(ID)).toEqual([]);
    asker.slots.discard(got!.path);
    expect(filesIn(asker.dir)).toEqual([]);
  });

  test("a saved file that is not what was saved is dropped, never offered", async () => {
    const { holder, path } = await holderWithFile();
    const bytes = new Uint8Array(readFileSync(path));
    bytes[bytes.length - 1]! ^= 0xff;
    writeFileSync(path, bytes);
    const [a, h] = streamPair();
    const [got] = await Promise.all([askerOver(a).fetch(prompt(250, 250)), holder.serve(ASKER, h)]);
    expect(got).toBeUndefined();
    expect(holder.counters.sent).toBe(0);
    expect(readdirSync(join(path, "..")).filter((n) => n.endsWith(".bin"))).toEqual([]);
  });

  test("a member gets one KV stream at a time: a second while the first is open is told it is busy", async () => {
    const { holder } = await holderWithFile();
    const [idle, h1] = streamPair();
    const first = holder.serve(ASKER, h1);
    const [a, h2] = streamPair();
    await holder.serve(ASKER, h2);
    expect(await readFrame(a.recv)).toEqual({ miss: expect.stringMatching(/busy/) });
    // Another member is not held back by it.
    const [b, h3] = streamPair();
    const [got] = await Promise.all([askerOver(b).fetch(prompt(250, 250)), holder.serve("3".repeat(64), h3)]);
    expect(got?.tokens).toBe(192);
    await idle.send.finish();
    await first;
    expect(await readFrame(idle.recv)).toEqual({ miss: expect.any(String) });
  });

  test.each([
    ["not a frame", Uint8Array.from([0xff, 0xff, 0xff, 0xff, 1, 2, 3])],
    ["a frame that is not JSON", Uint8Array.from([0, 0, 0, 3, 0x7b, 0x7b, 0x7b])],
  ])("junk (%s) ends that stream only; the holder answers the next", async (_, junk) => {
    const { holder } = await holderWithFile();
    const [a, h] = streamPair();
    await a.send.writeAll(junk);
    await a.send.finish();
    await holder.serve(ASKER, h);
    expect(holder.counters.sent).toBe(0);
    const [b, h2] = streamPair();
    const [got] = await Promise.all([askerOver(b).fetch(prompt(250, 250)), holder.serve(ASKER, h2)]);
    expect(got?.tokens).toBe(192);
  });

  test.each([
    ["a chain of something else", { identity: ID, build: BUILD, chain: ["nothex"] }],
    ["an identity that is no content's", { identity: "../../etc", build: BUILD, chain: ["0".repeat(32)] }],
    ["fields it does not know", { identity: ID, build: BUILD, chain: ["0".repeat(32)], path: "/etc/passwd" }],
  ])("an ask with %s gets a miss", async (_, ask) => {
    const { holder } = await holderWithFile();
    const [a, h] = streamPair();
    await writeFrame(a.send, ask);
    await holder.serve(ASKER, h);
    expect(await readFrame(a.recv)).toEqual({ miss: "the ask is not one this node reads" });
  });
});

describe("an asker takes nothing on a member's word", () => {
  const file = slotFile(192);
  const sha = (b: Uint8Array) => new Bun.CryptoHasher("sha256").update(b).digest("hex");
  const offer = (o: Partial<{ tokens: number; bytes: number; sha256: string; prefillTps: number }> = {}): KvAnswer => ({ offer: { tokens: 192, bytes: file.length, sha256: sha(file), prefillTps: 100, ...o } });

  /** A holder built by hand: answers the ask with `answer`, and on go sends `payload`. */
  async function rogue(stream: Stream, answer: unknown, payload: Uint8Array): Promise<void> {
    await readFrame(stream.recv);
    await writeFrame(stream.send, answer);
    const go = (await readFrame(stream.recv).catch(() => null)) as { go?: boolean } | null;
    if (go?.go) await stream.send.writeAll(payload).catch(() => undefined);
    await stream.send.finish().catch(() => undefined);
  }

  test.each([
    ["bytes that are not those it offered", offer({ sha256: sha(slotFile(192, { row: 8, layers: 2, token: (i) => 100 + i })).replace(/^./, "0") }), file, /hash/],
    ["more bytes than it offered", offer(), new Uint8Array([...file, 0]), /more than the/],
    ["fewer bytes than it offered, then the end", offer({ bytes: file.length + 1 }), file, /ended after/],
    ["a cache of other tokens, hashed right", offer({ sha256: sha(slotFile(192, { token: (i) => 7 + i })) }), slotFile(192, { token: (i) => 7 + i }), /token 0 is not the prompt's/],
    ["a file that does not walk to its end, hashed right", offer({ bytes: file.length - 1, sha256: sha(file.subarray(0, file.length - 1)) }), file.subarray(0, file.length - 1), /ends|short/],
    ["more tokens than the prompt has", offer({ tokens: 320 }), file, /320 tokens of a 250-token prompt/],
    ["tokens that are not whole blocks", offer({ tokens: 150 }), file, /not whole blocks/],
    ["more bytes than the node keeps", offer({ bytes: 2 << 20 }), file, /more than the 1048576/],
    ["an answer of another shape", { offer: { tokens: "all" } }, file, /not one this node reads/],
  ])("%s: refused, nothing kept", async (_, answer, payload, why) => {
    const [a, h] = streamPair();
    const asker = askerOver(a, { maxBytes: 1 << 20 });
    const [got] = await Promise.allSettled([asker.fetch(prompt(250, 250)), rogue(h, answer, payload)]);
    expect(got.status).toBe("rejected");
    expect(String((got as PromiseRejectedResult).reason)).toMatch(why);
    expect(filesIn(asker.dir)).toEqual([]);
  });

  test("an honest offer from the same hand is kept: the cases above fail on their lie alone", async () => {
    const [a, h] = streamPair();
    const asker = askerOver(a);
    const [got] = await Promise.all([asker.fetch(prompt(250, 250)), rogue(h, offer(), file)]);
    expect(got?.tokens).toBe(192);
  });

  test("a member outside --hosts is not asked at all", async () => {
    const [a, h] = streamPair();
    const asker = askerOver(a, { mayHold: false });
    expect(await asker.fetch(prompt(250, 250))).toBeUndefined();
    await a.send.finish();
    // The holder's end got nothing: no ask was written.
    expect(await readFrame(h.recv)).toBeNull();
  });

  test("an offer not worth fetching (this node reads as fast) is declined: nothing is sent for it", async () => {
    const [a, h] = streamPair();
    const asker = askerOver(a);
    asker.follow.rates.add(`prefill:${ID}`, 1_000_000, 1_000);
    const [got] = await Promise.all([asker.fetch(prompt(250, 250)), rogue(h, offer(), file)]);
    expect(got).toBeUndefined();
    expect(asker.follow.counters.declined).toBe(1);
    expect(filesIn(asker.dir)).toEqual([]);
  });

  test("fetches under way count against the disk budget: a second that would pass it with the first is refused before a byte of it comes", async () => {
    const pairs = [streamPair(), streamPair()];
    const { slots, dir } = cacheOf();
    const lines: string[] = [];
    let next = 0;
    const follow = new KvFollow({ build: BUILD, open: async () => pairs[next++]![0], mayHold: () => true, keeps: () => true, slots, maxBytes: Math.floor(file.length * 1.5), log: createLog("text", (l) => lines.push(l)) });
    // The first holder offers, then waits before it sends: its bytes are under way when the second offers.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const slow = (async () => {
      const s = pairs[0]![1];
      await readFrame(s.recv);
      await writeFrame(s.send, offer());
      await readFrame(s.recv);
      await held;
      await s.send.writeAll(file);
      await s.send.finish();
    })();
    const first = follow.fetchFrom(HOLDER, dir, ID, prompt(250, 250));
    await waitFor(() => next === 1 && follow["receiving"] > 0, { what: "the first fetch to be receiving" });
    const [second] = await Promise.all([follow.fetchFrom(HOLDER, dir, ID, prompt(250, 250)).catch((err: Error) => err.message), rogue(pairs[1]![1], offer(), file)]);
    expect(String(second)).toMatch(/more than the \d+ this node keeps/);
    release();
    expect((await first)?.tokens).toBe(192);
    await slow;
  });

  // Issue 43: a file with the right tokens and a made-up layer passed the walk, was received whole
  // and pushed the node's own conversations out of the budget before llama-server refused it.
  const SHAPE: KvShape = { layers: 2, kvDim: 4 };
  test.each<[string, Uint8Array, RegExp]>([
    ["a made-up third layer, hashed right", slotFile(192, { layers: 3 }), /holds 3 layers; the model has 2/],
    ["rows twice the model's width, hashed right", slotFile(192, { row: 16 }), /rows are 16 bytes; the model's are 8/],
  ])("a cache not of the model's shape is refused once walked, never restored or kept: %s", async (_, payload, why) => {
    const [a, h] = streamPair();
    const asker = askerOver(a, { shape: SHAPE });
    const [got] = await Promise.all([asker.fetch(prompt(250, 250)).catch((err: Error) => err.message), rogue(h, offer({ bytes: payload.length, sha256: sha(payload) }), payload)]);
    expect(String(got)).toMatch(why);
    expect(filesIn(asker.dir)).toEqual([]);
  });

  test("an offer of more bytes than the model's KV of its tokens can take is refused before a byte of it is written", async () => {
    const [a, h] = streamPair();
    const asker = askerOver(a, { shape: SHAPE });
    const huge = maxSlotBytes(SHAPE, 192) + 1;
    let sent = false;
    const holderSide = (async () => {
      await readFrame(h.recv);
      await writeFrame(h.send, offer({ bytes: huge }));
      sent = (await readFrame(h.recv).catch(() => null)) !== null;
    })();
    const got = await asker.fetch(prompt(250, 250)).catch((err: Error) => err.message);
    await holderSide;
    expect(String(got)).toMatch(/this model's KV of them takes at most/);
    expect(sent).toBe(false);
    expect(filesIn(asker.dir)).toEqual([]);
  });

  /** A model whose KV is kept in q8_0: one 34-byte block a row. */
  const Q8_SHAPE: KvShape = { layers: 2, kvDim: 32 };
  test.each<[string, Uint8Array, KvShape, (f: Uint8Array) => void, RegExp]>([
    ["a value that is not a number (f16 NaN)", slotFile(192), SHAPE, (f) => f.set([0x01, 0x7e], f.length - 64), /that is not a number/],
    ["a V value that is infinite (f16 +Inf)", slotFile(192), SHAPE, (f) => f.set([0x00, 0x7c], f.length - 2), /that is not a number/],
    ["a q8_0 block whose scale is NaN", slotFile(192, { type: 8, row: 34 }), Q8_SHAPE, (f) => f.set([0x01, 0x7e], f.length - 34), /that is not a number/],
    ["a q8_0 quant of -128 (beyond what ggml writes)", slotFile(192, { type: 8, row: 34 }), Q8_SHAPE, (f) => f.set([0x80], f.length - 5), /of -128/],
  ])("a cache holding %s is refused once walked, never restored or kept", async (_, bad, shape, poison, why) => {
    poison(bad);
    const [a, h] = streamPair();
    const asker = askerOver(a, { shape });
    const [got] = await Promise.all([asker.fetch(prompt(250, 250)).catch((err: Error) => err.message), rogue(h, offer({ bytes: bad.length, sha256: sha(bad) }), bad)]);
    expect(String(got)).toMatch(/values are out of range: layer \d \((K|V)\) holds a value/);
    expect(String(got)).toMatch(why);
    expect(filesIn(asker.dir)).toEqual([]);
  });

  test.each<[string, Uint8Array, KvShape]>([
    ["f16", file, SHAPE],
    ["q8_0", slotFile(192, { type: 8, row: 34 }), Q8_SHAPE],
  ])("an honest file of the model's shape is taken (%s)", async (_, honest, shape) => {
    const [a, h] = streamPair();
    const asker = askerOver(a, { shape });
    const [got] = await Promise.all([asker.fetch(prompt(250, 250)), rogue(h, offer({ bytes: honest.length, sha256: sha(honest) }), honest)]);
    expect(got?.tokens).toBe(192);
  });

  test("a holder's word on reading counts for nothing: claiming it reads fast (or slowly) changes neither the choice nor the time saved", async () => {
    for (const prefillTps of [1e6, 1]) {
      const [a, h] = streamPair();
      const asker = askerOver(a);
      const [got] = await Promise.all([asker.fetch(prompt(250, 250)), rogue(h, offer({ prefillTps }), file)]);
      expect(got?.tokens).toBe(192);
      expect(got?.prefillMs).toBe((192 / UNMEASURED_PREFILL_TPS) * 1000);
    }
  });
});

describe("servesContent: what the holder believes of the asker, from its announcement", () => {
  const disk = [{ name: "m", size: 1, need: 1, ref: undefined, identity: ID }];
  test.each([
    ["serves a model of that content", { serving: ["m"], modelsOnDisk: disk }, true],
    ["has it on disk but does not serve it", { serving: [], modelsOnDisk: disk }, false],
    ["serves a model of that name with other content", { serving: ["m"], modelsOnDisk: [{ ...disk[0]!, identity: "b".repeat(64) }] }, false],
    ["serves it, its content not worked out yet", { serving: ["m"], modelsOnDisk: [{ ...disk[0]!, identity: undefined }] }, false],
    ["is not a member", undefined, false],
  ])("a member that %s", (_, a, expected) => {
    expect(servesContent(a as Parameters<typeof servesContent>[0], ID)).toBe(expected);
  });
});
