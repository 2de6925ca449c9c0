/**
 * How large each llama.cpp RPC request may be on the worker end (the pure table, per protocol), and
 * the rewriter holding a connection to what its session allocated, byte for byte on a real session.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { RPC_TENSOR_BYTES, RpcCmd } from "../../tunnel/rpc-protocol.ts";
import { checkRequest, MAX_GRAPH_NODES, protocolMajor, requestBound, type LimitContext } from "../../tunnel/rpc-limits.ts";
import { RpcRequestRewriter } from "../../tunnel/rpc-transform.ts";
import { concat, frame, rng, splitRandomly } from "../../harness/rpc-frames.ts";

describe("request limits (pure): what each command may declare", () => {
  const v7: LimitContext = { major: 7, forkRegisterPeer: false, largestBuffer: 0 };
  const v8: LimitContext = { ...v7, major: 8 };
  const T = RPC_TENSOR_BYTES;
  const graph7 = 12 + MAX_GRAPH_NODES * (8 + 2 * T);

  // [what, cmd, context, smallest accepted, largest accepted]
  test.each([
    ["v7 ALLOC_BUFFER", RpcCmd.ALLOC_BUFFER, v7, 12, 12],
    ["v7 GET_ALIGNMENT", RpcCmd.GET_ALIGNMENT, v7, 4, 4],
    ["v7 GET_MAX_SIZE", RpcCmd.GET_MAX_SIZE, v7, 4, 4],
    ["v7 BUFFER_GET_BASE", RpcCmd.BUFFER_GET_BASE, v7, 8, 8],
    ["v7 FREE_BUFFER", RpcCmd.FREE_BUFFER, v7, 8, 8],
    ["v7 BUFFER_CLEAR", RpcCmd.BUFFER_CLEAR, v7, 9, 9],
    ["v7 SET_TENSOR, no buffer yet: header only", RpcCmd.SET_TENSOR, v7, T + 9, T + 9],
    ["v7 SET_TENSOR within a 1 MiB buffer", RpcCmd.SET_TENSOR, { ...v7, largestBuffer: 1 << 20 }, T + 9, T + 9 + (1 << 20)],
    ["v7 SET_TENSOR_HASH", RpcCmd.SET_TENSOR_HASH, v7, T + 16, T + 16],
    ["v7 GET_TENSOR", RpcCmd.GET_TENSOR, v7, T + 16, T + 16],
    ["v7 COPY_TENSOR", RpcCmd.COPY_TENSOR, v7, 2 * T, 2 * T],
    ["v7 GRAPH_COMPUTE", RpcCmd.GRAPH_COMPUTE, v7, 12, graph7],
    ["v7 GET_DEVICE_MEMORY", RpcCmd.GET_DEVICE_MEMORY, v7, 4, 4],
    ["v7 INIT_TENSOR", RpcCmd.INIT_TENSOR, v7, T, T],
    ["v7 GET_ALLOC_SIZE", RpcCmd.GET_ALLOC_SIZE, v7, 4 + 11 * T, 4 + 11 * T],
    ["v7 HELLO", RpcCmd.HELLO, v7, 24, 24],
    ["v7 DEVICE_COUNT", RpcCmd.DEVICE_COUNT, v7, 0, 0],
    ["v7 GRAPH_RECOMPUTE", RpcCmd.GRAPH_RECOMPUTE, v7, 4, 4],
    ["v7 17 = MEMSET_TENSOR", RpcCmd.CMD_17, v7, T + 17, T + 17],
    ["fork 17 = REGISTER_PEER", RpcCmd.CMD_17, { ...v7, forkRegisterPeer: true }, 132, 132],
    ["v8 SET_TENSOR, with or without the cache flag", RpcCmd.SET_TENSOR, { ...v8, largestBuffer: 4096 }, T + 8, T + 9 + 4096],
    ["v8 SET_TENSOR_2D within a 4 KiB buffer", RpcCmd.SET_TENSOR_2D, { ...v8, largestBuffer: 4096 }, T + 32, T + 32 + 4096],
    ["v8 GET_TENSOR_2D", RpcCmd.GET_TENSOR_2D, v8, T + 32, T + 32],
    ["v8 GRAPH_COMPUTE (graph uid)", RpcCmd.GRAPH_COMPUTE, v8, 20, graph7 + 8],
    ["v8 GRAPH_RECOMPUTE (graph uid)", RpcCmd.GRAPH_RECOMPUTE, v8, 12, 12],
    ["v8.1 SYNCHRONIZE", RpcCmd.SYNCHRONIZE, v8, 4, 4],
    ["v8.1 SET_TENSOR_2D_HASH", RpcCmd.SET_TENSOR_2D_HASH, v8, T + 40, T + 40],
    ["v8 HELLO", RpcCmd.HELLO, v8, 24, 24],
  ] as const)("%s: accepted exactly between its bounds", (_, cmd, ctx, min, max) => {
    expect(requestBound(cmd, ctx)).toMatchObject({ min, max });
    expect(checkRequest(cmd, BigInt(min), ctx)).toBeUndefined();
    expect(checkRequest(cmd, BigInt(max), ctx)).toBeUndefined();
    if (min > 0) expect(checkRequest(cmd, BigInt(min - 1), ctx)).toContain("declares");
    expect(checkRequest(cmd, BigInt(max + 1), ctx)).toContain("declares");
    expect(checkRequest(cmd, 2n ** 64n - 1n, ctx)).toContain("declares");
  });

  test.each([
    ["v7 SET_TENSOR_2D (protocol 8 only)", RpcCmd.SET_TENSOR_2D, v7, "no such command"],
    ["v7 GET_TENSOR_2D", RpcCmd.GET_TENSOR_2D, v7, "no such command"],
    ["v7 COMM_INIT", RpcCmd.COMM_INIT, v7, "no such command"],
    ["v7 command 24", 24, v7, "no such command"],
    ["v7 RPC_CMD_NONE (18 upstream)", 18, v7, "no such command"],
    ["v8 COMM_INIT (dials an address the peer chose)", RpcCmd.COMM_INIT, v8, "around the tunnel"],
    ["v8 COMM_ALLREDUCE", RpcCmd.COMM_ALLREDUCE, v8, "around the tunnel"],
    ["v8 COMM_FREE", RpcCmd.COMM_FREE, v8, "around the tunnel"],
    ["v8 command 25", 25, v8, "no such command"],
    ["command 255", 255, v8, "no such command"],
    ["an unknown protocol, even HELLO", RpcCmd.HELLO, { ...v7, major: 3 }, "protocol 3"],
    ["an unknown protocol, SET_TENSOR", RpcCmd.SET_TENSOR, { ...v7, major: 9 }, "protocols 7 and 8 only"],
  ] as const)("%s: refused at any size", (_, cmd, ctx, why) => {
    for (const size of [0n, 4n, 24n, 1000n]) expect(checkRequest(cmd, size, ctx)).toContain(why);
  });

  test("a refusal names the command and what was allowed", () => {
    const why = checkRequest(RpcCmd.SET_TENSOR, 512n * 2n ** 20n, { ...v7, largestBuffer: 1000 });
    expect(why).toBe("RPC SET_TENSOR declares 536870912 payload bytes; protocol 7 allows 305 to 1305 (its header plus the largest buffer this session allocated (1000 bytes))");
  });

  test.each([
    ["7.0.0", 7],
    ["8.1.2", 8],
    ["12.0.0", 12],
    ["", undefined],
    ["seven", undefined],
  ] as const)("protocolMajor(%p) = %p", (v, major) => expect(protocolMajor(v)).toBe(major));
});

describe("the worker's rewriter enforces the limits of its session", () => {
  const hello = () => frame(RpcCmd.HELLO, new Uint8Array(24));
  const alloc = (size: number) => {
    const p = new Uint8Array(12);
    new DataView(p.buffer).setBigUint64(4, BigInt(size), true);
    return frame(RpcCmd.ALLOC_BUFFER, p);
  };
  const setTensorHeader = (size: bigint) => {
    const h = new Uint8Array(9);
    h[0] = RpcCmd.SET_TENSOR;
    new DataView(h.buffer).setBigUint64(1, size, true);
    return h;
  };
  const rewriter = () => new RpcRequestRewriter({ forkRegisterPeer: false, rpcProtocol: () => "7.0.0" }, { rewrites: 0 });
  const pushAll = async (r: RpcRequestRewriter, chunks: Uint8Array[]) => {
    const out: Uint8Array[] = [];
    for (const c of chunks) out.push(...(await r.push(c)));
    return concat(out);
  };

  test("a SET_TENSOR declaring 512 MiB after HELLO is refused, and not one byte of its header goes on", async () => {
    const r = rewriter();
    const passed: Uint8Array[] = [];
    passed.push(...(await r.push(hello())));
    // The header arrives in two pieces; neither may be forwarded.
    const header = setTensorHeader(512n * 2n ** 20n);
    const first = r.push(header.subarray(0, 5));
    expect(first).toEqual([]);
    await expect(Promise.resolve(r.push(concat([header.subarray(5), new Uint8Array(T_HEADER)])))).rejects.toThrow("SET_TENSOR declares 536870912 payload bytes");
    expect(Buffer.compare(concat(passed), hello())).toBe(0);
    expect(await r.push(new Uint8Array(100))).toEqual([]);
  });

  test("SET_TENSOR is bounded by the largest buffer ALLOC_BUFFER asked for, on that connection", async () => {
    const data = (n: number) => frame(RpcCmd.SET_TENSOR, new Uint8Array(T_HEADER + n));
    const r = rewriter();
    const ok = concat([hello(), alloc(1000), alloc(4000), alloc(10), data(4000), data(1)]);
    expect(Buffer.compare(await pushAll(r, [ok]), ok)).toBe(0);
    await expect(pushAll(r, [data(4001)])).rejects.toThrow("allows 305 to 4305");
    await expect(pushAll(rewriter(), [hello(), data(1)])).rejects.toThrow("largest buffer this session allocated (0 bytes)");
  });

  test("an ALLOC_BUFFER beyond the memory the node offers lifts the bound only to that memory", async () => {
    // Found by fuzzing: asking for 1 TiB (which rpc-server fails to allocate) must not admit a 512 MiB upload.
    const data = (n: number) => frame(RpcCmd.SET_TENSOR, new Uint8Array(T_HEADER + n));
    const r = new RpcRequestRewriter({ forkRegisterPeer: false, rpcProtocol: () => "7.0.0", offeredBytes: 4096 }, { rewrites: 0 });
    const ok = concat([hello(), alloc(2 ** 40), data(4096)]);
    expect(Buffer.compare(await pushAll(r, [ok]), ok)).toBe(0);
    const header = setTensorHeader(512n * 2n ** 20n);
    await expect(Promise.resolve(r.push(header))).rejects.toThrow("allows 305 to 4401");
  });

  test("the default is the pinned protocol's limits", async () => {
    const r = new RpcRequestRewriter({ forkRegisterPeer: false }, { rewrites: 0 });
    await expect(pushAll(r, [frame(RpcCmd.SET_TENSOR_2D, new Uint8Array(400))])).rejects.toThrow("SET_TENSOR_2D refused: protocol 7 has no such command");
  });

  test("under an unknown protocol nothing passes", async () => {
    const r = new RpcRequestRewriter({ forkRegisterPeer: false, rpcProtocol: () => "9.0.0" }, { rewrites: 0 });
    await expect(pushAll(r, [hello()])).rejects.toThrow("rpc-server speaks RPC protocol 9");
  });

  test.each([1, 2, 3])("seed %d: the recorded session crosses the rewriter byte for byte", async (seed) => {
    const recording = new Uint8Array(readFileSync(join(import.meta.dir, "..", "fixtures", "rpc-tiny-session.bin")));
    const out = await pushAll(rewriter(), splitRandomly(recording, rng(seed)));
    expect(Buffer.compare(out, recording)).toBe(0);
  });
});

/** SET_TENSOR's header in protocol 7: rpc_tensor | cache_flag u8 | offset u64. */
const T_HEADER = RPC_TENSOR_BYTES + 9;
