/**
 * The worker end's client-to-server direction: the session's limits decide whether a command may
 * pass at the size it declares (`rpc-limits.ts`), the RPC parser what passes through untouched and
 * what is collected, `rewriteRequest` what a collected command becomes. A command over its limit
 * is an error, which closes that one connection before any of the command reaches rpc-server.
 */
import { LLAMA_SOURCE } from "../llama/pin.ts";
import { protocolMajor, SessionLimits } from "./rpc-limits.ts";
import { RpcRequestParser, type Piece } from "./rpc-parser.ts";
import { captures, rewriteRequest, type RewriteCounters, type RewriteOptions } from "./rpc-rewrites.ts";

/** The major version the limits follow: our rpc-server's answer to HELLO, else the pinned build's. */
function majorOf(opts: RewriteOptions): number {
  return protocolMajor(opts.rpcProtocol?.() ?? LLAMA_SOURCE.rpcProtocol) ?? -1;
}

/**
 * The parser and the rewrites over one connection. `push` answers synchronously unless a collected
 * command needs an asynchronous rewrite (zero-transfer), so the hot path of generation (small
 * GRAPH_RECOMPUTE and GET_TENSOR requests) pays no promise hops.
 */
export class RpcRequestRewriter {
  private readonly parser: RpcRequestParser;
  private readonly limits: SessionLimits;

  constructor(
    private readonly opts: RewriteOptions,
    private readonly counters: RewriteCounters,
  ) {
    const limits = new SessionLimits(majorOf(opts), opts.forkRegisterPeer, opts.offeredBytes);
    this.limits = limits;
    this.parser = new RpcRequestParser({
      check: (cmd, size) => limits.check(cmd, size),
      capture: captures(opts),
      observes: (cmd) => limits.observes(cmd),
      observed: (cmd, payload) => limits.observed(cmd, payload),
    });
  }

  /** The session has asked for a buffer (it is past its setup). */
  get allocated(): boolean {
    return this.limits.allocated;
  }

  push(chunk: Uint8Array): Uint8Array[] | Promise<Uint8Array[]> {
    const pieces = this.parser.push(chunk);
    if (pieces.every((p) => p.kind === "bytes")) return pieces.map((p) => (p as { bytes: Uint8Array }).bytes);
    return this.rewrite(pieces);
  }

  private async rewrite(pieces: Piece[]): Promise<Uint8Array[]> {
    const out: Uint8Array[] = [];
    for (const piece of pieces) {
      if (piece.kind === "bytes") out.push(piece.bytes);
      else if (piece.kind === "error") throw new Error(piece.message);
      else {
        const payload = (await rewriteRequest(piece.cmd, piece.payload, this.opts, this.counters)) ?? piece.payload;
        const frame = new Uint8Array(piece.header.length + payload.length);
        frame.set(piece.header, 0);
        frame.set(payload, piece.header.length);
        out.push(frame);
      }
    }
    return out;
  }
}

/** The same as a Web Streams TransformStream, for stream pipelines. */
export function rpcRequestTransform(opts: RewriteOptions, counters: RewriteCounters): TransformStream<Uint8Array, Uint8Array> {
  const rewriter = new RpcRequestRewriter(opts, counters);
  return new TransformStream<Uint8Array, Uint8Array>({
    async transform(chunk, controller) {
      for (const piece of await rewriter.push(chunk)) controller.enqueue(piece);
    },
  });
}
