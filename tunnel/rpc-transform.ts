/**
 * The worker end's client-to-server direction as a Web Streams TransformStream: the RPC parser
 * decides what passes through untouched and what is collected, `rewriteRequest` decides what a
 * collected command becomes. A broken stream (an absurd size) errors the transform, which closes
 * that one connection.
 */
import { RpcRequestParser } from "./rpc-parser.ts";
import { captures, rewriteRequest, type RewriteCounters, type RewriteOptions } from "./rpc-rewrites.ts";

/** A tensor larger than this in one SET_TENSOR is no model anyone runs. */
export const MAX_RPC_PAYLOAD = 64 * 2 ** 30;

export function rpcRequestTransform(opts: RewriteOptions, counters: RewriteCounters, maxPayload = MAX_RPC_PAYLOAD): TransformStream<Uint8Array, Uint8Array> {
  const parser = new RpcRequestParser({ maxPayload, capture: captures(opts) });
  return new TransformStream<Uint8Array, Uint8Array>({
    async transform(chunk, controller) {
      for (const piece of parser.push(chunk)) {
        if (piece.kind === "bytes") controller.enqueue(piece.bytes);
        else if (piece.kind === "error") throw new Error(piece.message);
        else {
          const replaced = await rewriteRequest(piece.cmd, piece.payload, opts, counters);
          const payload = replaced ?? piece.payload;
          const frame = new Uint8Array(piece.header.length + payload.length);
          frame.set(piece.header, 0);
          frame.set(payload, piece.header.length);
          controller.enqueue(frame);
        }
      }
    },
  });
}
