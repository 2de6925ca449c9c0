/**
 * The RPC tunnels of this node. Host side: for each peer a TCP port on 127.0.0.1; every connection
 * to it becomes one QUIC stream to that peer. Worker side: each such stream from a peer becomes a
 * TCP connection to this node's own `rpc-server`, with the request direction going through the
 * RPC transform (rewrites, zero-transfer). Counted per peer and direction.
 */
import { createConnection, createServer, type Server, type Socket } from "node:net";
import type { Log } from "../log.ts";
import type { Stream } from "../mesh/transport.ts";
import { StreamKind } from "../mesh/wire.ts";
import { quicToSocket, socketToQuic, type DirectionCounter } from "./pump.ts";
import type { RewriteOptions } from "./rpc-rewrites.ts";
import { RpcRequestRewriter } from "./rpc-transform.ts";

export interface PeerTunnelCounters {
  /** Host side: our llama-server and the peer's rpc-server. */
  toPeer: DirectionCounter;
  fromPeer: DirectionCounter;
  connectionsOut: number;
  /** Worker side: the peer's llama-server and our rpc-server. */
  fromPeerHost: DirectionCounter;
  toPeerHost: DirectionCounter;
  connectionsIn: number;
  /** Requests the worker side rewrote. */
  rewrites: number;
}

export interface TunnelsOptions {
  log: Log;
  /** Opens a stream of `kind` to a peer (undefined when it is gone). */
  openStream: (peerId: string, kind: number) => Promise<Stream | undefined>;
  /** Port of this node's rpc-server, once it runs. */
  rpcPort: () => number | undefined;
  rewrites: RewriteOptions;
}

const newCounters = (): PeerTunnelCounters => ({
  toPeer: { bytes: 0 },
  fromPeer: { bytes: 0 },
  connectionsOut: 0,
  fromPeerHost: { bytes: 0 },
  toPeerHost: { bytes: 0 },
  connectionsIn: 0,
  rewrites: 0,
});

export class Tunnels {
  private readonly listeners = new Map<string, { server: Server; port: number }>();
  private readonly sockets = new Set<Socket>();
  readonly counters = new Map<string, PeerTunnelCounters>();

  constructor(private readonly opts: TunnelsOptions) {}

  private countersOf(peerId: string): PeerTunnelCounters {
    let c = this.counters.get(peerId);
    if (!c) this.counters.set(peerId, (c = newCounters()));
    return c;
  }

  private track(socket: Socket): void {
    this.sockets.add(socket);
    socket.once("close", () => this.sockets.delete(socket));
  }

  /** The local port that reaches `peerId`'s rpc-server, opening it when needed. */
  async portFor(peerId: string): Promise<number> {
    const open = this.listeners.get(peerId);
    if (open) return open.port;
    const server = createServer({ allowHalfOpen: true, noDelay: true }, (socket) => void this.outgoing(peerId, socket));
    const port = await new Promise<number>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve((server.address() as { port: number }).port));
    });
    this.listeners.set(peerId, { server, port });
    return port;
  }

  private async outgoing(peerId: string, socket: Socket): Promise<void> {
    this.track(socket);
    socket.setNoDelay(true);
    const c = this.countersOf(peerId);
    let stream: Stream | undefined;
    try {
      stream = await this.opts.openStream(peerId, StreamKind.RPC);
    } catch (err) {
      this.opts.log.warn("rpc tunnel could not open a stream", { peer: peerId.slice(0, 10), error: (err as Error).message });
    }
    if (!stream) return void socket.destroy();
    c.connectionsOut++;
    await Promise.all([socketToQuic(socket, stream.send, c.toPeer), quicToSocket(stream.recv, socket, c.fromPeer)]);
  }

  /** A stream a peer's host opened to our rpc-server. */
  async incoming(peerId: string, stream: Stream): Promise<void> {
    const port = this.opts.rpcPort();
    if (!port) {
      await stream.send.reset(3).catch(() => undefined);
      return;
    }
    const c = this.countersOf(peerId);
    const socket = createConnection({ host: "127.0.0.1", port, allowHalfOpen: true, noDelay: true });
    this.track(socket);
    const connected = await new Promise<boolean>((resolve) => {
      socket.once("connect", () => resolve(true));
      socket.once("error", () => resolve(false));
    });
    if (!connected) {
      await stream.send.reset(3).catch(() => undefined);
      return;
    }
    c.connectionsIn++;
    const rewriter = new RpcRequestRewriter(this.opts.rewrites, c);
    const onError = (err: Error) => this.opts.log.warn("rpc tunnel closed a connection", { peer: peerId.slice(0, 10), error: err.message });
    await Promise.all([quicToSocket(stream.recv, socket, c.fromPeerHost, rewriter, onError), socketToQuic(socket, stream.send, c.toPeerHost)]);
  }

  /** Closes the port to a peer that left (its connections die with the QUIC connection). */
  closeFor(peerId: string): void {
    const open = this.listeners.get(peerId);
    if (!open) return;
    this.listeners.delete(peerId);
    open.server.close();
  }

  close(): void {
    for (const id of [...this.listeners.keys()]) this.closeFor(id);
    for (const s of this.sockets) s.destroy();
  }
}
