/**
 * The worker end's client-to-server direction: the RPC parser decides what passes through
 * untouched and what is collected, `rewriteRequest` decides what a collected command becomes. A
 * broken stream (an absurd size) is an error, which closes that one connection.
 */
import { RpcRequestParser, type Piece } from "./rpc-parser.ts";
import { captures, rewriteRequest, type RewriteCounters, type RewriteOptions } from "./rpc-rewrites.ts";

/** A tensor larger than this in one SET_TENSOR is no model anyone runs. */
export const MAX_RPC_PAYLOAD = 64 * 2 ** 30;

/**
 * The parser and the rewrites over one connection. `push` answers synchronously unless a collected
 * command needs an asynchronous rewrite (zero-transfer), so the hot path of generation (small
 * GRAPH_RECOMPUTE and GET_TENSOR requests) pays no promise hops.
 */
export class RpcRequestRewriter {
  private readonly parser: RpcRequestParser;

  constructor(
    private readonly opts: RewriteOptions,
    private readonly counters: RewriteCounters,
    maxPayload = MAX_RPC_PAYLOAD,
  ) {
    this.parser = new RpcRequestParser({ maxPayload, capture: captures(opts) });
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
export function rpcRequestTransform(opts: RewriteOptions, counters: RewriteCounters, maxPayload = MAX_RPC_PAYLOAD): TransformStream<Uint8Array, Uint8Array> {
  const rewriter = new RpcRequestRewriter(opts, counters, maxPayload);
  return new TransformStream<Uint8Array, Uint8Array>({
    async transform(chunk, controller) {
      for (const piece of await rewriter.push(chunk)) controller.enqueue(piece);
    },
  });
}
