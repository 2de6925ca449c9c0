/**
 * Zero-transfer on a worker, with a real GGUF and SET_TENSOR_HASH payloads as a host (or a member
 * built from our modules) sends them: the right hash places the tensor; a peer that names the
 * largest tensor again and again with hashes that never match costs one read and hash of it, not
 * one per frame (issue 27: 1,000 such frames cost 26 s of the node's main thread).
 */
import { afterAll, expect, test } from "bun:test";
import { gguf } from "@huggingface/gguf";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Log } from "../../base/log.ts";
import { tensorByteSize } from "../../models/ggml-types.ts";
import { fnv1a64, hashFileName, RPC_TENSOR_BYTES, SET_TENSOR_HASH_BYTES } from "../../tunnel/rpc-protocol.ts";
import { ZeroTransfer } from "../../tunnel/zero-transfer.ts";
import { testModel } from "../../harness/models.ts";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
const quiet: Log = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined } as unknown as Log;

function setTensorHash(name: string, hash: bigint): Uint8Array {
  const p = new Uint8Array(SET_TENSOR_HASH_BYTES);
  p.set(new TextEncoder().encode(name), 228);
  new DataView(p.buffer).setBigUint64(RPC_TENSOR_BYTES + 8, hash, true);
  return p;
}

async function largestTensor(path: string) {
  const { tensorInfos, tensorDataOffset } = await gguf(path, { allowLocalFile: true });
  const sized = tensorInfos.map((t) => ({ name: t.name, offset: Number(tensorDataOffset + t.offset), bytes: tensorByteSize(t.dtype, t.shape) ?? 0 }));
  const t = sized.sort((a, b) => b.bytes - a.bytes)[0]!;
  const data = new Uint8Array(await Bun.file(path).slice(t.offset, t.offset + t.bytes).arrayBuffer());
  return { ...t, hash: fnv1a64(data) };
}

/** A worker's zero-transfer over the wide model, with an empty cache, and that model's largest tensor. */
async function worker() {
  const model = await testModel("wide", "q8_0");
  const cacheDir = mkdtempSync(join(tmpdir(), "mesh-test-zt-"));
  dirs.push(cacheDir);
  const zt = new ZeroTransfer({ cacheDir, files: () => [model], maxCacheBytes: 2 ** 30, log: quiet });
  return { cacheDir, zt, t: await largestTensor(model) };
}

test("a tensor named again and again with hashes that never match is read and hashed once; the right hash still places it", async () => {
  const { cacheDir, zt, t } = await worker();

  const FRAMES = 200;
  for (let i = 1; i <= FRAMES; i++) await zt.onSetTensorHash(setTensorHash(t.name, t.hash ^ BigInt(i)));
  expect(zt.stats).toEqual({ hits: 0, bytesSaved: 0, misses: FRAMES, bytesHashed: t.bytes });

  await zt.onSetTensorHash(setTensorHash(t.name, t.hash));
  expect(zt.stats).toMatchObject({ hits: 1, bytesSaved: t.bytes, bytesHashed: t.bytes });
  const placed = join(cacheDir, hashFileName(t.hash));
  expect(existsSync(placed)).toBe(true);
  expect(fnv1a64(new Uint8Array(await Bun.file(placed).arrayBuffer()))).toBe(t.hash);
});

test("frames at once for one tensor share its one read; a tensor no local file has costs nothing", async () => {
  const { zt, t } = await worker();
  await Promise.all(Array.from({ length: 50 }, (_, i) => zt.onSetTensorHash(setTensorHash(t.name, t.hash ^ BigInt(i + 1)))));
  await zt.onSetTensorHash(setTensorHash("no.such.tensor", 1n));
  expect(zt.stats).toEqual({ hits: 0, bytesSaved: 0, misses: 51, bytesHashed: t.bytes });
  // The first request for it with the right hash places it from the bytes it reads.
  await zt.onSetTensorHash(setTensorHash(t.name, t.hash));
  expect(zt.stats.hits).toBe(1);
});
