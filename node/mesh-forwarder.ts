/**
 * Sends a request to the member that serves it, over an HTTP stream of the mesh connection, and
 * gives back its answer. Two members that dial each other at once keep one connection and close
 * the other: a request that went out on the closed one before any answer goes once more, on the
 * one kept. So does one whose connection the member reset (alive, it had lost the connection): it
 * goes once more on the connection the membership dials at once.
 */
import { forwardHttp, RESPONSE_IDLE_MS } from "../mesh/http-stream.ts";
import type { PeerTable } from "../mesh/peer-table.ts";
import { StreamKind } from "../streams/wire.ts";
import { shortId } from "../base/short-id.ts";

/** The request as the router hands it on. */
export interface ForwardedRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: Uint8Array;
}

export interface MeshForwarderOptions {
  /** The members this node holds now. */
  peers: Pick<PeerTable, "get" | "openStream" | "replacedAfterFailure">;
  /** How long the answer's head may take (the model's load, and a non-streamed answer's whole generation). */
  headMs: number;
}

export class MeshForwarder {
  constructor(private readonly o: MeshForwarderOptions) {}

  async forward(peerId: string, req: ForwardedRequest, signal: AbortSignal): Promise<Response> {
    for (let attempt = 0; ; attempt++) {
      const carrier = this.o.peers.get(peerId)?.conn;
      try {
        const stream = await this.o.peers.openStream(peerId, StreamKind.HTTP);
        if (!stream) throw new Error(`peer ${shortId(peerId)} is not connected`);
        return await forwardHttp(stream, req, signal, { headMs: this.o.headMs, idleMs: RESPONSE_IDLE_MS });
      } catch (err) {
        // The one kept may still be in its handshake here when the other side closed the duplicate first.
        if (attempt > 0 || signal.aborted || !carrier) throw err;
        if (!(await this.o.peers.replacedAfterFailure(peerId, carrier, { reconnects: true })) || signal.aborted) throw err;
      }
    }
  }
}
