import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { RpcRequestParser, type Piece } from "../../tunnel/rpc-parser.ts";
import { fnv1a64, readSetTensorHash, RPC_TENSOR_BYTES, RpcCmd, SET_TENSOR_HASH_BYTES } from "../../tunnel/rpc-protocol.ts";
import { registerPeerEndpoint, rewriteRequest, withRegisterPeerEndpoint } from "../../tunnel/rpc-rewrites.ts";
import { rpcRequestTransform } from "../../tunnel/rpc-transform.ts";
import { SessionLimits } from "../../tunnel/rpc-limits.ts";
import { concat, frame, rng, splitRandomly } from "../../harness/rpc-frames.ts";
import { cacheVictims } from "../../tunnel/zero-transfer.ts";
import { tensorByteSize } from "../../models/ggml-types.ts";

function tensorPayload(name: string, extra: number): Uint8Array {
  const p = new Uint8Array(RPC_TENSOR_BYTES + extra);
  new DataView(p.buffer).setUint32(8, 8, true); // type Q8_0
  p.set(new TextEncoder().encode(name), 228);
  return p;
}

/** One of every command, with payload sizes from 0 to 200 KB. */
function craftedStream(r: () => number): { bytes: Uint8Array; frames: { cmd: number; size: number }[] } {
  const frames: Uint8Array[] = [];
  const meta: { cmd: number; size: number }[] = [];
  const add = (cmd: number, payload: Uint8Array) => {
    frames.push(frame(cmd, payload));
    meta.push({ cmd, size: payload.length });
  };
  add(RpcCmd.HELLO, new Uint8Array(24).fill(1));
  for (let cmd = 0; cmd <= 22; cmd++) {
    if (cmd === RpcCmd.HELLO) continue;
    const size = cmd === RpcCmd.SET_TENSOR ? 200_000 : Math.floor(r() * 400);
    add(cmd, Uint8Array.from({ length: size }, () => Math.floor(r() * 256)));
  }
  const hashReq = tensorPayload("blk.0.ffn_up.weight", 16);
  new DataView(hashReq.buffer).setBigUint64(RPC_TENSOR_BYTES + 8, 0x1234n, true);
  add(RpcCmd.SET_TENSOR_HASH, hashReq);
  add(RpcCmd.GRAPH_RECOMPUTE, new Uint8Array(4));
  add(RpcCmd.DEVICE_COUNT, new Uint8Array(0));
  return { bytes: concat(frames), frames: meta };
}

/** A check that lets any size up to `max` through (the chunking tests use random sizes per command). */
const upTo = (max: number) => (cmd: number, size: bigint) => (size > BigInt(max) ? `RPC command ${cmd} declares ${size} bytes, over the ${max} byte limit` : undefined);

function run(parser: RpcRequestParser, chunks: Uint8Array[]): Piece[] {
  return chunks.flatMap((c) => parser.push(c));
}

describe("RpcRequestParser over random chunk splits", () => {
  test.each(Array.from({ length: 40 }, (_, i) => i + 1))("seed %d: passes every byte through in order", (seed) => {
    const r = rng(seed);
    const { bytes } = craftedStream(r);
    const parser = new RpcRequestParser({ check: upTo(1 << 30), capture: () => false });
    const out = run(parser, splitRandomly(bytes, r));
    expect(out.every((p) => p.kind === "bytes")).toBe(true);
    expect(Buffer.compare(concat(out.map((p) => (p as { bytes: Uint8Array }).bytes)), bytes)).toBe(0);
    expect(parser.atBoundary()).toBe(true);
    expect(parser.commands).toBe(26);
  });

  test.each(Array.from({ length: 20 }, (_, i) => i + 100))("seed %d: collects exactly the commands asked for, whole", (seed) => {
    const r = rng(seed);
    const { bytes, frames } = craftedStream(r);
    const wanted = new Set<number>([RpcCmd.HELLO, RpcCmd.SET_TENSOR_HASH, RpcCmd.CMD_17]);
    const parser = new RpcRequestParser({ check: upTo(1 << 30), capture: (cmd) => wanted.has(cmd) });
    const out = run(parser, splitRandomly(bytes, r));
    const collected = out.filter((p) => p.kind === "frame") as Extract<Piece, { kind: "frame" }>[];
    expect(collected.map((f) => f.cmd)).toEqual(frames.filter((f) => wanted.has(f.cmd)).map((f) => f.cmd));
    expect(collected.map((f) => f.payload.length)).toEqual(frames.filter((f) => wanted.has(f.cmd)).map((f) => f.size));
    // Reassembled (collected frames put back in place), the stream is the input.
    const rebuilt = concat(out.map((p) => (p.kind === "bytes" ? p.bytes : p.kind === "frame" ? concat([p.header, p.payload]) : new Uint8Array())));
    expect(Buffer.compare(rebuilt, bytes)).toBe(0);
    const hash = readSetTensorHash(collected.findLast((f) => f.cmd === RpcCmd.SET_TENSOR_HASH)!.payload);
    expect([hash.tensor.name, hash.tensor.type, hash.hash]).toEqual(["blk.0.ffn_up.weight", 8, 0x1234n]);
  });

  test("a truncated stream stops mid-command, not at a boundary", () => {
    const { bytes } = craftedStream(rng(7));
    for (const cut of [1, 5, 9, 100, bytes.length - 1]) {
      const parser = new RpcRequestParser({ check: upTo(1 << 30), capture: () => false });
      parser.push(bytes.subarray(0, cut));
      expect(parser.atBoundary()).toBe(false);
    }
  });

  test.each([
    [2n ** 63n, "over the"],
    [2n ** 40n, "over the"],
    [BigInt(1 << 20) + 1n, "over the"],
  ])("an absurd size (%p) is an error, and nothing after it passes", (size, message) => {
    const parser = new RpcRequestParser({ check: upTo(1 << 20), capture: () => false });
    const header = new Uint8Array(9);
    header[0] = RpcCmd.SET_TENSOR;
    new DataView(header.buffer).setBigUint64(1, size, true);
    const out = parser.push(concat([frame(RpcCmd.DEVICE_COUNT, new Uint8Array(0)), header, new Uint8Array(100)]));
    expect(out.at(-1)).toMatchObject({ kind: "error", message: expect.stringContaining(message) });
    expect(parser.push(new Uint8Array(50))).toEqual([]);
  });
});

describe("rewrites", () => {
  const opts = { forkRegisterPeer: false };
  test("HELLO capabilities are zeroed; zero ones pass as they are", async () => {
    const counters = { rewrites: 0 };
    expect(await rewriteRequest(RpcCmd.HELLO, new Uint8Array(24).fill(5), opts, counters)).toEqual(new Uint8Array(24));
    expect(await rewriteRequest(RpcCmd.HELLO, new Uint8Array(24), opts, counters)).toBeUndefined();
    expect(counters.rewrites).toBe(1);
  });

  const registerPeer = () => {
    const p = new Uint8Array(132);
    new DataView(p.buffer).setUint32(0, 3, true);
    p.set(new TextEncoder().encode("127.0.0.1:41000"), 4);
    return p;
  };
  test("REGISTER_PEER is rewritten only under the fork's protocol", async () => {
    const counters = { rewrites: 0 };
    const resolve = (e: string) => (e === "127.0.0.1:41000" ? "127.0.0.1:52000" : undefined);
    expect(await rewriteRequest(RpcCmd.CMD_17, registerPeer(), { forkRegisterPeer: false, resolvePeerEndpoint: resolve }, counters)).toBeUndefined();
    const out = await rewriteRequest(RpcCmd.CMD_17, registerPeer(), { forkRegisterPeer: true, resolvePeerEndpoint: resolve }, counters);
    expect(registerPeerEndpoint(out!)).toBe("127.0.0.1:52000");
    expect(new DataView(out!.buffer).getUint32(0, true)).toBe(3);
    expect(counters.rewrites).toBe(1);
    expect(withRegisterPeerEndpoint(registerPeer(), "x".repeat(200))).toBeUndefined();
  });

  test("through the transform: upstream MEMSET_TENSOR (17) passes untouched", async () => {
    const memset = frame(RpcCmd.CMD_17, tensorPayload("t", 17));
    const hello = frame(RpcCmd.HELLO, new Uint8Array(24).fill(9));
    const out = await collect([hello, memset], { forkRegisterPeer: false });
    expect(Buffer.compare(out.subarray(9 + 24), memset)).toBe(0);
    expect(out.subarray(9, 9 + 24).every((b) => b === 0)).toBe(true);
  });

  test("SET_TENSOR_HASH goes to the zero-transfer hook before it is forwarded", async () => {
    const seen: string[] = [];
    const req = tensorPayload("blk.1.ffn_down.weight", 16);
    const out = await collect([frame(RpcCmd.SET_TENSOR_HASH, req)], {
      forkRegisterPeer: false,
      onSetTensorHash: async (p) => void seen.push(readSetTensorHash(p).tensor.name),
    });
    expect(seen).toEqual(["blk.1.ffn_down.weight"]);
    expect(out.length).toBe(9 + SET_TENSOR_HASH_BYTES);
  });

  test("an absurd size errors the transform", async () => {
    const header = new Uint8Array(9);
    new DataView(header.buffer).setBigUint64(1, 2n ** 62n, true);
    await expect(collect([header], { forkRegisterPeer: false })).rejects.toThrow("ALLOC_BUFFER declares 4611686018427387904 payload bytes");
  });
});

async function collect(chunks: Uint8Array[], opts: Parameters<typeof rpcRequestTransform>[0]): Promise<Uint8Array> {
  const input = new ReadableStream<Uint8Array>({
    start(c) {
      for (const ch of chunks) c.enqueue(ch);
      c.close();
    },
  });
  const parts: Uint8Array[] = [];
  for await (const p of input.pipeThrough(rpcRequestTransform(opts, { rewrites: 0 }))) parts.push(p);
  return concat(parts);
}

test("FNV-1a 64 matches the reference, in one piece or several", () => {
  const ref = (d: Uint8Array) => {
    let h = 0xcbf29ce484222325n;
    for (const b of d) h = ((h ^ BigInt(b)) * 0x100000001b3n) & 0xffffffffffffffffn;
    return h;
  };
  const data = Uint8Array.from({ length: 3_000_000 }, (_, i) => (i * 31 + 7) & 255);
  expect(fnv1a64(data)).toBe(ref(data));
  expect(fnv1a64(data.subarray(123_456), fnv1a64(data.subarray(0, 123_456)))).toBe(ref(data));
  expect(fnv1a64(new Uint8Array(0))).toBe(0xcbf29ce484222325n);
});

describe("zero-transfer helpers", () => {
  test.each([
    ["within the bound: nothing goes", [{ name: "a", size: 10, mtimeMs: 1 }], 100, []],
    ["over: oldest first until it fits", [{ name: "new", size: 60, mtimeMs: 3 }, { name: "old", size: 60, mtimeMs: 1 }, { name: "mid", size: 60, mtimeMs: 2 }], 100, ["old", "mid"]],
    ["a zero bound empties it", [{ name: "a", size: 1, mtimeMs: 1 }], 0, ["a"]],
  ] as const)("cacheVictims: %s", (_, files, max, victims) => expect(cacheVictims(files, max)).toEqual([...victims]));

  test.each([
    [0, [4, 3], 48],
    [1, [64, 2], 256],
    [8, [64, 10], 680],
    [12, [512, 2], 576],
    [30, [8], 16],
    [99, [8], undefined],
  ] as const)("tensorByteSize(type %p, %p) = %p", (type, ne, bytes) => expect(tensorByteSize(type, ne)).toBe(bytes));
});

describe("a recorded session (llama-server loading tiny onto an rpc-server, then one completion)", () => {
  const recording = new Uint8Array(readFileSync(join(import.meta.dir, "..", "fixtures", "rpc-tiny-session.bin")));
  test.each([1, 2, 3, 4, 5])("seed %d: every command parses, passes protocol 7's limits, and every byte passes through", (seed) => {
    const seen = new Map<number, number>();
    const limits = new SessionLimits(7, false);
    const refusals: string[] = [];
    const parser = new RpcRequestParser({
      check: (cmd, size) => {
        const refused = limits.check(cmd, size);
        if (refused) refusals.push(refused);
        return refused;
      },
      observes: (cmd) => limits.observes(cmd),
      observed: (cmd, payload) => limits.observed(cmd, payload),
      capture: (cmd) => {
        seen.set(cmd, (seen.get(cmd) ?? 0) + 1);
        return cmd === RpcCmd.HELLO;
      },
    });
    const out = run(parser, splitRandomly(recording, rng(seed)));
    const rebuilt = concat(out.map((p) => (p.kind === "bytes" ? p.bytes : p.kind === "frame" ? concat([p.header, p.payload]) : new Uint8Array())));
    expect(refusals).toEqual([]);
    expect(Buffer.compare(rebuilt, recording)).toBe(0);
    expect(parser.atBoundary()).toBe(true);
    expect(seen.get(RpcCmd.HELLO)).toBeGreaterThanOrEqual(2);
    for (const cmd of [RpcCmd.ALLOC_BUFFER, RpcCmd.SET_TENSOR, RpcCmd.GRAPH_COMPUTE, RpcCmd.GET_TENSOR, RpcCmd.GET_DEVICE_MEMORY]) {
      expect(seen.get(cmd) ?? 0).toBeGreaterThan(0);
    }
    expect([...seen.keys()].every((cmd) => cmd <= RpcCmd.COMM_FREE)).toBe(true);
    // A real load allocates: the session is past its setup.
    expect(limits.allocated).toBe(true);
  });

  test("an empty ALLOC_BUFFER is no setup done (a session cannot keep rpc-server with it)", () => {
    const limits = new SessionLimits(7, false);
    const alloc = (size: bigint) => {
      const p = new Uint8Array(12);
      new DataView(p.buffer).setBigUint64(4, size, true);
      limits.observed(RpcCmd.ALLOC_BUFFER, p);
    };
    alloc(0n);
    expect(limits.allocated).toBe(false);
    alloc(4096n);
    expect(limits.allocated).toBe(true);
  });
});
