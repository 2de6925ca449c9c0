import { afterAll, describe, expect, test } from "bun:test";
import { gguf } from "@huggingface/gguf";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { encodeTensor } from "../../models/ggml-quant.ts";
import { GGUF_ALIGNMENT, GgmlType, rowBytes, tensorBytes, writeGguf, type MetadataValue } from "../../models/gguf-writer.ts";

const dir = mkdtempSync(join(tmpdir(), "mesh-gguf-test-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("rowBytes", () => {
  const cases: [GgmlType, number, number | string][] = [
    [GgmlType.F32, 64, 256],
    [GgmlType.F16, 64, 128],
    [GgmlType.Q8_0, 64, 68],
    [GgmlType.Q8_0, 256, 272],
    [GgmlType.Q8_0, 33, "multiple of 32"],
  ];
  test.each(cases)("type %p, %p elements", (type, n, expected) => {
    if (typeof expected === "string") expect(() => rowBytes(type, n)).toThrow(expected);
    else expect(rowBytes(type, n)).toBe(expected);
  });
});

describe("Q8_0 encoding", () => {
  test("a block holds an f16 scale of max|x|/127 and rounded int8 values", () => {
    const values = new Float32Array(32).map((_, i) => (i - 16) / 8); // -2 .. 1.875
    const bytes = encodeTensor(values, GgmlType.Q8_0);
    expect(bytes.length).toBe(34);
    const view = new DataView(bytes.buffer, bytes.byteOffset);
    const d = view.getFloat16(0, true);
    expect(d).toBeCloseTo(2 / 127, 4);
    const q = new Int8Array(bytes.buffer, bytes.byteOffset + 2, 32);
    expect(q[0]).toBe(-127);
    expect(q[16]).toBe(0);
    for (let i = 0; i < 32; i++) expect(Math.abs(q[i]! * d - values[i]!)).toBeLessThan(d);
  });
  test("an all-zero block has scale 0 and zeros", () => {
    const bytes = encodeTensor(new Float32Array(64), GgmlType.Q8_0);
    expect([...bytes].every((b) => b === 0)).toBe(true);
  });
});

test("a written file reads back with @huggingface/gguf: metadata, tensor table, aligned data", async () => {
  const path = join(dir, "t.gguf");
  const metadata = new Map<string, MetadataValue>([
    ["general.architecture", { type: "string", value: "llama" }],
    ["llama.block_count", { type: "u32", value: 3 }],
    ["x.eps", { type: "f32", value: 0.5 }],
    ["x.flag", { type: "bool", value: true }],
    ["x.words", { type: "string[]", value: ["a", "bé", ""] }],
    ["x.ints", { type: "i32[]", value: [-1, 2] }],
  ]);
  const a = new Float32Array([1, 2, 3]);
  const b = new Float32Array(64).map((_, i) => i / 64);
  const size = await writeGguf(path, metadata, [
    { name: "a", dims: [3], type: GgmlType.F32, data: () => encodeTensor(a, GgmlType.F32) },
    { name: "b", dims: [32, 2], type: GgmlType.Q8_0, data: () => encodeTensor(b, GgmlType.Q8_0) },
  ]);
  const file = readFileSync(path);
  expect(file.length).toBe(size);
  const read = await gguf(path, { allowLocalFile: true });
  const md = read.metadata as Record<string, unknown>;
  expect(md["general.architecture"]).toBe("llama");
  expect(md["llama.block_count"]).toBe(3);
  expect(md["x.eps"]).toBe(0.5);
  expect(md["x.flag"]).toBe(true);
  expect(md["x.words"]).toEqual(["a", "bé", ""]);
  expect(md["x.ints"]).toEqual([-1, 2]);
  expect(read.tensorInfos.map((t) => [t.name, t.shape.map(Number), t.dtype])).toEqual([
    ["a", [3], GgmlType.F32],
    ["b", [32, 2], GgmlType.Q8_0],
  ]);
  expect(read.tensorDataOffset % BigInt(GGUF_ALIGNMENT)).toBe(0n);
  for (const t of read.tensorInfos) {
    const start = Number(read.tensorDataOffset + t.offset);
    expect(start % GGUF_ALIGNMENT).toBe(0);
    const expected = t.name === "a" ? encodeTensor(a, GgmlType.F32) : encodeTensor(b, GgmlType.Q8_0);
    expect(tensorBytes({ dims: t.shape.map(Number), type: t.dtype as GgmlType })).toBe(expected.length);
    expect(Buffer.compare(file.subarray(start, start + expected.length), expected)).toBe(0);
  }
});

test("a tensor that produces the wrong number of bytes is refused", async () => {
  const write = writeGguf(join(dir, "bad.gguf"), new Map(), [
    { name: "a", dims: [4], type: GgmlType.F32, data: () => new Uint8Array(8) },
  ]);
  await expect(write).rejects.toThrow("tensor a: produced 8 bytes, expected 16");
});
