import { describe, expect, test } from "bun:test";
import { fetchOrPrefill, FETCH_MARGIN, MIN_DEADLINE_MS, UNMEASURED_PREFILL_TPS } from "../../kv/fetch-decision.ts";
import { BLOCK_TOKENS, chainOf, sharedBlocks } from "../../kv/prefix-chain.ts";
import { Rates, RATE_TTL_MS } from "../../kv/rates.ts";
import { bytesSource, pieceBytes, slotLayout, SlotLayoutError, trimmed } from "../../kv/slot-layout.ts";
import { slotFile } from "../../harness/slot-file-fixture.ts";
import { kvShapeOf, maxSlotBytes, rowBytesOf, shapeMismatch } from "../../kv/kv-shape.ts";

describe("slotLayout", () => {
  test("walks a file to its end and reads its tokens", () => {
    const l = slotLayout(bytesSource(slotFile(10)));
    expect([...l.tokens]).toEqual(Array.from({ length: 10 }, (_, i) => 100 + i));
    expect(l.streams.map((s) => s.cells)).toEqual([0, 10]);
  });
  const file = slotFile(10);
  test.each([
    ["cut short", file.subarray(0, file.length - 1)],
    ["a byte more", new Uint8Array([...file, 0])],
    ["wrong magic", new Uint8Array([0, ...file.subarray(1)])],
    ["media", slotFile(10, { media: true })],
  ])("refuses a file %s", (_why, bytes) => {
    expect(() => slotLayout(bytesSource(bytes))).toThrow(SlotLayoutError);
  });
  test("refuses cells out of position", () => {
    const bad = slotFile(10);
    const at = 12 + 14 * 4 + 8 + 4 + 12; // cell 1's position
    new DataView(bad.buffer).setInt32(at, 7, true);
    expect(() => slotLayout(bytesSource(bad))).toThrow("cell 1");
  });
});

describe("trimmed", () => {
  test.each([false, true])("a file cut to m tokens is the file llama-server would write for them (v transposed: %p)", (vTrans) => {
    const whole = slotFile(10, { vTrans });
    const src = bytesSource(whole);
    const cut = trimmed(slotLayout(src), 4);
    const bytes = new Uint8Array(Buffer.concat([...pieceBytes(src, cut.pieces)]));
    expect(bytes.length).toBe(cut.bytes);
    expect(bytes).toEqual(slotFile(4, { vTrans }));
  });
  test("cut to its length it is the same file", () => {
    const whole = slotFile(10);
    const src = bytesSource(whole);
    expect(new Uint8Array(Buffer.concat([...pieceBytes(src, trimmed(slotLayout(src), 10).pieces)]))).toEqual(whole);
  });
  test.each([0, 11, 2.5])("refuses to cut to %p", (m) => {
    expect(() => trimmed(slotLayout(bytesSource(slotFile(10))), m)).toThrow(SlotLayoutError);
  });
});

describe("prefix chain", () => {
  const tokens = (n: number, at = -1) => Int32Array.from({ length: n }, (_, i) => (i === at ? 9999 : i));
  test.each([
    [BLOCK_TOKENS * 3, BLOCK_TOKENS * 3, -1, 3],
    [BLOCK_TOKENS * 3 + 10, BLOCK_TOKENS * 2, -1, 2],
    [BLOCK_TOKENS * 3, BLOCK_TOKENS * 3, BLOCK_TOKENS + 5, 1],
    [BLOCK_TOKENS * 3, BLOCK_TOKENS * 3, 0, 0],
    [BLOCK_TOKENS - 1, BLOCK_TOKENS * 3, -1, 0],
  ])("%p tokens against %p changed at %p share %p blocks", (a, b, changedAt, shared) => {
    expect(sharedBlocks(chainOf(tokens(a)), chainOf(tokens(b, changedAt)))).toBe(shared);
  });
});

describe("fetchOrPrefill", () => {
  const base = { tokens: 4096, bytes: 12 * 2 ** 20, ownPrefillTps: 500 as number | undefined, linkBps: 110 * 2 ** 20, restoreBps: 2 * 2 ** 30 };
  test.each([
    ["a long prompt on a slow reader, over a fast link", {}, true],
    ["a fast reader", { ownPrefillTps: 200_000 }, false],
    // Issue 43: a holder's claimed rate once made a fetch (and its "saved" seconds) of anything.
    ["our rate not known: a fast reader assumed, and a fetch that wins clearly still goes", { ownPrefillTps: undefined }, true],
    ["our rate not known, a fetch that would win only against a slow reader: read again", { ownPrefillTps: undefined, linkBps: 10 * 2 ** 20 }, false],
    ["a slow link", { linkBps: 1 * 2 ** 20 }, false],
  ])("%s", (_why, change, fetch) => {
    const v = fetchOrPrefill({ ...base, ...change });
    expect(v.fetch).toBe(fetch);
    if (v.fetch) {
      expect(v.fetchMs).toBeLessThanOrEqual(v.prefillMs * FETCH_MARGIN);
      expect(v.deadlineMs).toBeGreaterThanOrEqual(Math.max(MIN_DEADLINE_MS, v.prefillMs));
    }
  });
  test("not measured here: the reading it would save is worked out at the assumed fast rate, whatever a holder says", () => {
    expect(fetchOrPrefill({ ...base, ownPrefillTps: undefined }).prefillMs).toBe((4096 / UNMEASURED_PREFILL_TPS) * 1000);
  });
});

describe("Rates", () => {
  test("averages, and forgets an old rate", () => {
    let now = 0;
    const r = new Rates(() => now);
    r.add("a", 1000, 1000);
    r.add("a", 2000, 1000);
    expect(r.get("a")).toBeCloseTo(1200);
    r.add("b", 0, 10);
    expect(r.get("b")).toBeUndefined();
    now = RATE_TTL_MS + 1;
    expect(r.get("a")).toBeUndefined();
  });
});

describe("the model's KV shape (issue 43)", () => {
  const facts = { architecture: "llama", fileKind: undefined, poolingType: undefined, contextLength: 8192, blockCount: 4, embeddingLength: 256, headCount: 8, headCountKv: 2, name: undefined, fileType: 7 };
  test("from GGUF facts: layers and the KV heads' width; none when they do not say", () => {
    expect(kvShapeOf(facts)).toEqual({ layers: 4, kvDim: 64 });
    expect(kvShapeOf({ ...facts, headCountKv: undefined })).toEqual({ layers: 4, kvDim: 256 });
    expect(kvShapeOf({ ...facts, headCount: undefined })).toBeUndefined();
    expect(kvShapeOf(undefined)).toBeUndefined();
  });
  test.each<[string, number, number, number | undefined]>([
    ["f16", 1, 64, 128],
    ["f32", 0, 64, 256],
    ["q8_0", 8, 64, 68],
    ["q4_0", 2, 64, 36],
    ["q8_0 of a width that is not whole blocks", 8, 48, undefined],
    ["a type no KV cache is kept in", 12, 64, undefined],
  ])("row bytes: %s", (_, type, dim, bytes) => expect(rowBytesOf(type, dim)).toBe(bytes));
  test("a real slot file's shape matches; an extra layer, another width or a transposed V of another width does not", () => {
    const shape = { layers: 2, kvDim: 4 };
    const walk = (f: Uint8Array) => {
      const layout = slotLayout(bytesSource(f));
      return shapeMismatch(layout, shape, (at) => new DataView(f.buffer, f.byteOffset + at, 4).getInt32(0, true));
    };
    expect(walk(slotFile(128))).toBeUndefined();
    expect(walk(slotFile(128, { layers: 3 }))).toContain("3 layers");
    expect(walk(slotFile(128, { row: 16 }))).toContain("16 bytes");
    // The fixture's transposed V is 3 elements of 2 bytes: not the model's 4.
    expect(walk(slotFile(128, { vTrans: true }))).toContain("6 bytes");
    expect(maxSlotBytes(shape, 128)).toBeGreaterThan(slotFile(128).length);
  });
});
