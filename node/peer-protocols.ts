/**
 * The protocols a node serves its peers, each registered once: the kind byte of its QUIC streams,
 * the direct TLS path's purpose where that path carries it too (and how many such connections one
 * member may have served at once), and its handler. The mesh connection's streams and the direct
 * path both dispatch through here, as iroh's router registers one handler per protocol: a new
 * protocol is a kind in `streams/wire.ts`, a purpose in `tunnel/direct-auth.ts` if it takes the
 * direct path, and one `register` call. RPC's direct connections are the exception: they carry
 * `rpc-server`'s own bytes, not a stream, and `tunnel/` answers them.
 */
import type { Stream } from "../streams/stream.ts";
import { StreamKind } from "../streams/wire.ts";
import type { DirectStreams, StreamPurpose } from "../tunnel/direct.ts";

export interface PeerProtocol {
  /** For errors and logs. */
  name: string;
  kind: StreamKind;
  /** Its purpose on the direct path, and the connections of it one member may have served at once there. */
  direct?: { purpose: StreamPurpose; perMember: number };
  /** A stream of it a peer opened (its kind byte, or the direct path's hello, already read). */
  serve(peerId: string, stream: Stream): unknown;
}

export class PeerProtocols implements DirectStreams {
  private readonly byKind = new Map<number, PeerProtocol>();
  private readonly byPurpose = new Map<StreamPurpose, PeerProtocol>();

  /** Adds a protocol; a kind or purpose taken twice (or the control stream's) is a programming error. */
  register(p: PeerProtocol): this {
    if (p.kind === StreamKind.CONTROL || this.byKind.has(p.kind)) throw new Error(`stream kind ${p.kind} (${p.name}) is taken`);
    if (p.direct && this.byPurpose.has(p.direct.purpose)) throw new Error(`direct purpose ${p.direct.purpose} (${p.name}) is taken`);
    this.byKind.set(p.kind, p);
    if (p.direct) this.byPurpose.set(p.direct.purpose, p);
    return this;
  }

  /** A stream a peer opened on the mesh connection, its kind byte read: to its protocol, or reset when none has that kind. */
  dispatch(peerId: string, kind: number, stream: Stream): void {
    const p = this.byKind.get(kind);
    if (p) void p.serve(peerId, stream);
    else void stream.send.reset(2).catch(() => undefined);
  }

  /** What answers a direct connection of `purpose`, and its cap per member; none: the connection is closed. */
  forPurpose(purpose: StreamPurpose): { serve: (peerId: string, stream: Stream) => unknown; perMember: number } | undefined {
    const p = this.byPurpose.get(purpose);
    return p?.direct ? { serve: (peerId, stream) => p.serve(peerId, stream), perMember: p.direct.perMember } : undefined;
  }
}

type Serve = PeerProtocol["serve"];

/** What a node serves its peers, over its mesh connections and its direct path alike. */
export function nodeProtocols(serve: { rpc: Serve; http: Serve; model: Serve; kv: Serve }): PeerProtocols {
  return (
    new PeerProtocols()
      .register({ name: "rpc", kind: StreamKind.RPC, serve: serve.rpc })
      .register({ name: "http", kind: StreamKind.HTTP, serve: serve.http })
      // A model copy asks one file at a time; a few spare connections for retries and one still closing.
      .register({ name: "model", kind: StreamKind.MODEL, direct: { purpose: "model", perMember: 4 }, serve: serve.model })
      // The holder serves one KV stream per member (`kv-holder.ts`); one spare for a connection still closing.
      .register({ name: "kv", kind: StreamKind.KV, direct: { purpose: "kv", perMember: 2 }, serve: serve.kv })
  );
}
