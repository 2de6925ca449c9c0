/**
 * The RPC framing under fuzzing: `RpcRequestParser` and `RpcRequestRewriter` over arbitrary byte
 * streams cut at arbitrary points. Nothing throws but a clean error (a piece, or the rewriter's
 * rejection); what passes through is the input, byte for byte, up to the error, whatever the
 * chunking; a command is checked before anything is collected (and allocated) for it, and no
 * command reaches rpc-server declaring more than the session's limits allow; a recorded llama.cpp
 * session, cut anywhere, passes unchanged.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { MAX_GRAPH_NODES, requestBound, type LimitContext } from "../../tunnel/rpc-limits.ts";
import { RpcRequestParser, type Piece } from "../../tunnel/rpc-parser.ts";
import { ALLOC_BUFFER_BYTES, HEADER_BYTES, HELLO_CAPS_BYTES, REGISTER_PEER_BYTES, RPC_TENSOR_BYTES, RpcCmd, SET_TENSOR_HASH_BYTES } from "../../tunnel/rpc-protocol.ts";
import type { RewriteOptions } from "../../tunnel/rpc-rewrites.ts";
import { RpcRequestRewriter } from "../../tunnel/rpc-transform.ts";
import { concat, cutAt, cuts } from "./arbitraries.ts";
import { holds, holdsAsync } from "./settings.ts";

const RUNS = 200;
const HANG_MS = 5_000;
const MAX = 4096;

function header(cmd: number, size: bigint): Uint8Array {
  const h = new Uint8Array(HEADER_BYTES);
  h[0] = cmd;
  new DataView(h.buffer).setBigUint64(1, size, true);
  return h;
}

const frame = (cmd: number, payload: Uint8Array) => concat([header(cmd, BigInt(payload.length)), payload]);

/** One request as a client might send it, or one that lies about its size, or plain junk. */
const request: fc.Arbitrary<Uint8Array> = fc.oneof(
  { weight: 4, arbitrary: fc.tuple(fc.integer({ min: 0, max: 25 }), fc.uint8Array({ maxLength: 300 })).map(([cmd, p]) => frame(cmd, p)) },
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.constantFrom<number>(RpcCmd.HELLO, RpcCmd.SET_TENSOR_HASH, RpcCmd.CMD_17, RpcCmd.ALLOC_BUFFER), fc.constantFrom(HELLO_CAPS_BYTES, SET_TENSOR_HASH_BYTES, REGISTER_PEER_BYTES, ALLOC_BUFFER_BYTES), fc.nat())
      .map(([cmd, size, fill]) => frame(cmd, new Uint8Array(size).fill(fill & 0xff))),
  },
  { weight: 1, arbitrary: fc.tuple(fc.nat({ max: 255 }), fc.bigInt({ min: 0n, max: 2n ** 64n - 1n })).map(([cmd, size]) => header(cmd, size)) },
  { weight: 1, arbitrary: fc.tuple(fc.nat({ max: 255 }), fc.bigInt({ min: BigInt(MAX) + 1n, max: 2n ** 64n - 1n })).map(([cmd, size]) => header(cmd, size)) },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 40 }) },
);

const rpcStream = fc.array(request, { maxLength: 12 }).map(concat);

type Part = { kind: "bytes"; bytes: Uint8Array } | { kind: "frame"; cmd: number; header: Uint8Array; payload: Uint8Array };
type Event = { checked: number } | { observed: number };

interface Rules {
  check: (cmd: number, size: bigint) => string | undefined;
  capture: (cmd: number, size: number) => boolean;
  observes: (cmd: number) => boolean;
}

/**
 * What a correct parser gives for `input` pushed in any chunks, and the calls it makes: commands
 * it collects come whole (to rewrite: as frames; only to read: as bytes, after `observed`), the
 * rest byte for byte as it arrives; a partial header or collected command is held back; nothing
 * from a refused header on. Written as plainly as possible, to check the real one against.
 */
function expected(input: Uint8Array, rules: Rules): { parts: Part[]; error: boolean; events: Event[] } {
  const parts: Part[] = [];
  const events: Event[] = [];
  const view = new DataView(input.buffer, input.byteOffset, input.length);
  let at = 0;
  while (input.length - at >= HEADER_BYTES) {
    const cmd = input[at]!;
    const size = view.getBigUint64(at + 1, true);
    events.push({ checked: cmd });
    if (rules.check(cmd, size) !== undefined) return { parts, error: true, events };
    const end = at + HEADER_BYTES + Number(size);
    const rewrite = rules.capture(cmd, Number(size));
    if (rewrite || rules.observes(cmd)) {
      if (end > input.length) break;
      if (rules.observes(cmd)) events.push({ observed: cmd });
      const whole = input.subarray(at, end);
      parts.push(rewrite ? { kind: "frame", cmd, header: whole.subarray(0, HEADER_BYTES), payload: whole.subarray(HEADER_BYTES) } : { kind: "bytes", bytes: whole });
    } else parts.push({ kind: "bytes", bytes: input.subarray(at, Math.min(end, input.length)) });
    at = end;
  }
  return { parts, error: false, events };
}

const rebuilt = (pieces: readonly (Piece | Part)[]) => concat(pieces.map((p) => (p.kind === "bytes" ? p.bytes : p.kind === "frame" ? concat([p.header, p.payload]) : new Uint8Array())));

/** Parser rules from a few generated choices: a size limit, per command or for all, and what to collect. */
const rules: fc.Arbitrary<Rules> = fc
  .record({
    limits: fc.option(fc.dictionary(fc.nat({ max: 25 }).map(String), fc.nat({ max: MAX })), { nil: undefined }),
    captureAll: fc.boolean(),
    observed: fc.uniqueArray(fc.nat({ max: 25 }), { maxLength: 4 }),
  })
  .map(({ limits, captureAll, observed }) => ({
    check: (cmd: number, size: bigint) => {
      const max = limits?.[String(cmd)] ?? MAX;
      return size > BigInt(max) ? `RPC command ${cmd} declares ${size} payload bytes, over its ${max}` : undefined;
    },
    capture: captureAll ? () => true : (cmd: number) => cmd === RpcCmd.HELLO,
    observes: (cmd: number) => observed.includes(cmd),
  }));

describe("RpcRequestParser, fuzzed", () => {
  test("arbitrary streams in arbitrary chunks: the input up to any error, byte for byte, the same calls in the same order", () => {
    holds(
      fc.property(rpcStream, cuts, rules, (bytes, offsets, r) => {
        const events: Event[] = [];
        const parser = new RpcRequestParser({
          check: (cmd, size) => (events.push({ checked: cmd }), r.check(cmd, size)),
          capture: r.capture,
          observes: r.observes,
          observed: (cmd) => void events.push({ observed: cmd }),
        });
        const pieces = cutAt(bytes, offsets).flatMap((c) => parser.push(c));
        const want = expected(bytes, r);
        expect(Buffer.compare(rebuilt(pieces), rebuilt(want.parts))).toBe(0);
        expect(events).toEqual(want.events);
        const errors = pieces.filter((p) => p.kind === "error");
        expect(errors.length).toBe(want.error ? 1 : 0);
        if (want.error) {
          expect(pieces.at(-1)?.kind).toBe("error");
          expect((errors[0] as { message: string }).message).toMatch(/\S/);
          expect(parser.push(bytes)).toEqual([]);
        }
      }),
      { runs: RUNS },
    );
  });

  test("a header the check refuses is never collected (so nothing of its declared size is allocated)", () => {
    holds(
      fc.property(fc.uint8Array({ maxLength: 64 }), fc.nat({ max: 255 }), fc.bigInt({ min: BigInt(MAX) + 1n, max: 2n ** 64n - 1n }), cuts, (before, cmd, size, offsets) => {
        const check = (_c: number, s: bigint) => (s > BigInt(MAX) ? "too big" : undefined);
        const asked: number[] = [];
        const parser = new RpcRequestParser({ check, capture: (_c, s) => (asked.push(s), true), observes: () => true });
        const pieces = cutAt(concat([before, header(cmd, size), new Uint8Array(32)]), offsets).flatMap((c) => parser.push(c));
        expect(asked.every((s) => s <= MAX)).toBe(true);
        for (const p of pieces) if (p.kind === "frame") expect(p.payload.length).toBeLessThanOrEqual(MAX);
      }),
      { runs: RUNS },
    );
  });
});

const T = RPC_TENSOR_BYTES;

/** A request sized as protocol 7 or 8 allows (so streams get past the limits), or a little off. */
function sizedRequest(major: number, fork: boolean): fc.Arbitrary<Uint8Array> {
  const ctx: LimitContext = { major, forkRegisterPeer: fork, largestBuffer: 2048 };
  const known = Array.from({ length: 26 }, (_, cmd) => cmd).filter((cmd) => !("refused" in requestBound(cmd, ctx)));
  return fc.tuple(fc.constantFrom(...known), fc.nat(), fc.constantFrom(0, 0, 0, 0, 0, 0, 0, 0, 0, 1, -1), fc.nat({ max: 255 })).map(([cmd, pick, off, fill]) => {
    const bound = requestBound(cmd, ctx);
    const [min, max] = "refused" in bound ? [0, 0] : [bound.min, Math.min(bound.max, bound.min + 1024)];
    const size = Math.max(0, min + (pick % (max - min + 1)) + off);
    const payload = new Uint8Array(size).fill(fill);
    // An ALLOC_BUFFER's payload is device u32 | size u64: ask for 0 to 4 KiB.
    if (cmd === RpcCmd.ALLOC_BUFFER && size === ALLOC_BUFFER_BYTES) new DataView(payload.buffer).setBigUint64(4, BigInt(pick % 4096), true);
    return frame(cmd, payload);
  });
}

/** Pushes every chunk through the rewriter; an error is a rejection carrying a message. */
async function rewriteAll(rewriter: RpcRequestRewriter, chunks: Uint8Array[]): Promise<{ bytes: Uint8Array; error: string | undefined }> {
  const out: Uint8Array[] = [];
  for (const c of chunks) {
    try {
      out.push(...(await rewriter.push(c)));
    } catch (err) {
      expect(err).toBeInstanceOf(Error);
      return { bytes: concat(out), error: (err as Error).message };
    }
  }
  return { bytes: concat(out), error: undefined };
}

const oneByteChunks = (bytes: Uint8Array) => Array.from({ length: bytes.length }, (_, i) => bytes.subarray(i, i + 1));

/**
 * Walks the commands rpc-server would get: each equals the input at the same offset except the
 * payloads the rewrites may change in place (HELLO, the fork's REGISTER_PEER), and none declares
 * more than its limit: a fixed size, a graph, or a tensor within a buffer the session asked for.
 */
function expectFaithfulAndBounded(output: Uint8Array, input: Uint8Array, fork: boolean): void {
  expect(output.length).toBeLessThanOrEqual(input.length);
  const view = new DataView(output.buffer, output.byteOffset, output.length);
  const graphMax = 20 + MAX_GRAPH_NODES * (8 + 2 * T);
  let largestAlloc = 0;
  let at = 0;
  while (output.length - at >= HEADER_BYTES) {
    const cmd = output[at]!;
    const size = view.getBigUint64(at + 1, true);
    expect(Buffer.compare(output.subarray(at, at + HEADER_BYTES), input.subarray(at, at + HEADER_BYTES))).toBe(0);
    expect(size <= BigInt(Math.max(graphMax, T + 41 + largestAlloc))).toBe(true);
    const end = Math.min(output.length, at + HEADER_BYTES + Number(size));
    const payload = output.subarray(at + HEADER_BYTES, end);
    const rewritable = (cmd === RpcCmd.HELLO && size === BigInt(HELLO_CAPS_BYTES)) || (fork && cmd === RpcCmd.CMD_17 && size === BigInt(REGISTER_PEER_BYTES));
    if (!rewritable) expect(Buffer.compare(payload, input.subarray(at + HEADER_BYTES, end))).toBe(0);
    if (cmd === RpcCmd.HELLO && rewritable) expect(payload.every((b) => b === 0)).toBe(true);
    if (cmd === RpcCmd.ALLOC_BUFFER && payload.length === ALLOC_BUFFER_BYTES) largestAlloc = Math.max(largestAlloc, Number(new DataView(payload.buffer, payload.byteOffset).getBigUint64(4, true)));
    at = end;
  }
}

describe("RpcRequestRewriter, fuzzed", () => {
  const endpoints = (e: string) => (e.length % 2 ? "127.0.0.1:52000" : undefined);
  const variants: [string, RewriteOptions, number][] = [
    ["protocol 7", { forkRegisterPeer: false, rpcProtocol: () => "7.0.0" }, 7],
    ["protocol 8", { forkRegisterPeer: false, rpcProtocol: () => "8.1.0" }, 8],
    ["the fork, zero-transfer hook", { forkRegisterPeer: true, resolvePeerEndpoint: endpoints, onSetTensorHash: async () => {}, rpcProtocol: () => "7.0.0" }, 7],
  ];
  for (const [name, opts, major] of variants) {
    test(`${name}: the input up to any error, only collected commands rewritten, every size within its limit, whatever the chunking`, async () => {
      const stream = fc.array(fc.oneof({ weight: 30, arbitrary: sizedRequest(major, opts.forkRegisterPeer) }, request), { maxLength: 16 }).map(concat);
      await holdsAsync(
        fc.asyncProperty(stream, cuts, async (bytes, offsets) => {
          // Pushed a byte at a time nothing before an error is lost; any other chunking may drop
          // what came before the error in its chunk (the connection closes on it anyway).
          const fine = await rewriteAll(new RpcRequestRewriter(opts, { rewrites: 0 }), oneByteChunks(bytes));
          const got = await rewriteAll(new RpcRequestRewriter(opts, { rewrites: 0 }), cutAt(bytes, offsets));
          expect(got.error).toBe(fine.error);
          if (got.error === undefined) expect(Buffer.compare(got.bytes, fine.bytes)).toBe(0);
          else expect(Buffer.compare(got.bytes, fine.bytes.subarray(0, got.bytes.length))).toBe(0);
          expectFaithfulAndBounded(fine.bytes, bytes, opts.forkRegisterPeer);
        }),
        { runs: RUNS, hangMs: HANG_MS },
      );
    });
  }

  test("a recorded session (llama-server loading a model onto an rpc-server), cut anywhere, passes unchanged", async () => {
    const recording = new Uint8Array(readFileSync(join(import.meta.dir, "..", "fixtures", "rpc-tiny-session.bin")));
    const fewCuts = fc.array(fc.nat({ max: recording.length }), { maxLength: 200 });
    await holdsAsync(
      fc.asyncProperty(fewCuts, async (offsets) => {
        const got = await rewriteAll(new RpcRequestRewriter({ forkRegisterPeer: false, rpcProtocol: () => "7.0.0" }, { rewrites: 0 }), cutAt(recording, offsets));
        expect(got.error).toBeUndefined();
        expect(Buffer.compare(got.bytes, recording)).toBe(0);
      }),
      { runs: 50, hangMs: HANG_MS },
    );
  });
});
