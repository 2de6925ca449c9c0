/**
 * The RPC tunnels of this node. Host side: for each peer a TCP port on 127.0.0.1; every connection
 * to it becomes one QUIC stream to that peer. Worker side: each such stream from a peer becomes a
 * TCP connection to this node's own `rpc-server`, with the request direction going through the
 * RPC transform (size limits per session, rewrites, zero-transfer). Counted per peer and direction.
 */
import { createConnection, createServer, type Server, type Socket } from "node:net";
import type { Log, LogFields } from "../base/log.ts";
import { throttledWarning } from "../base/throttled-log.ts";
import type { Stream } from "../streams/stream.ts";
import { StreamKind } from "../streams/wire.ts";
import { noticingFirst, quicToSocket, socketToQuic, socketToSocket, type DirectionCounter } from "./pump.ts";
import type { RewriteOptions } from "./rpc-rewrites.ts";
import { RPC_SETUP_MS, RpcSessions, type RpcSession } from "./rpc-sessions.ts";
import { RpcRequestRewriter } from "./rpc-transform.ts";
import { shortId } from "../base/short-id.ts";

export interface PeerTunnelCounters {
  /** Host side: our llama-server and the peer's rpc-server. */
  toPeer: DirectionCounter;
  fromPeer: DirectionCounter;
  connectionsOut: number;
  /** Worker side: the peer's llama-server and our rpc-server. */
  fromPeerHost: DirectionCounter;
  toPeerHost: DirectionCounter;
  connectionsIn: number;
  /** Worker side: the peer's RPC sessions into our rpc-server now (`rpc-sessions.ts`). */
  sessionsIn: number;
  /** Requests the worker side rewrote. */
  rewrites: number;
  /** Our connections to the peer went over the direct (TLS) path. */
  direct: boolean;
}

export interface TunnelsOptions {
  log: Log;
  /** Opens a stream of `kind` to a peer (undefined when it is gone). */
  openStream: (peerId: string, kind: number) => Promise<Stream | undefined>;
  /** Port of this node's rpc-server, once it runs. */
  rpcPort: () => number | undefined;
  rewrites: RewriteOptions;
  /** A direct (TLS) connection to a peer's rpc-server, when it offers one; undefined to use QUIC. */
  connectDirect?: (peerId: string) => Promise<Socket> | undefined;
  /** Whether a peer may hold sessions into our rpc-server (a guest may not: it would hold the owner's splits off); none: every peer. */
  mayUseRpc?: (peerId: string) => boolean;
}

/** After a failed direct connection, a peer is reached over QUIC for this long before trying again. */
const DIRECT_RETRY_MS = 60_000;

const newCounters = (): PeerTunnelCounters => ({
  toPeer: { bytes: 0 },
  fromPeer: { bytes: 0 },
  connectionsOut: 0,
  fromPeerHost: { bytes: 0 },
  toPeerHost: { bytes: 0 },
  connectionsIn: 0,
  sessionsIn: 0,
  rewrites: 0,
  direct: false,
});

export class Tunnels {
  private readonly listeners = new Map<string, { server: Server; port: Promise<number> }>();
  /** Sockets by peer, so a peer that leaves takes its connections (direct ones too) with it. */
  private readonly peerSockets = new Map<string, Set<Socket>>();
  private readonly directFailedAt = new Map<string, number>();
  readonly counters = new Map<string, PeerTunnelCounters>();
  private readonly sessions = new RpcSessions();
  private readonly warnRefused: (fields: LogFields) => void;

  constructor(private readonly opts: TunnelsOptions) {
    this.warnRefused = throttledWarning(opts.log, "refused an rpc session of a guest of the mesh");
  }

  private countersOf(peerId: string): PeerTunnelCounters {
    let c = this.counters.get(peerId);
    if (!c) this.counters.set(peerId, (c = newCounters()));
    return c;
  }

  private track(socket: Socket, peerId: string): void {
    let mine = this.peerSockets.get(peerId);
    if (!mine) this.peerSockets.set(peerId, (mine = new Set()));
    mine.add(socket);
    // An error while a path is being chosen must not reach the process as an unhandled event.
    socket.on("error", () => socket.destroy());
    socket.once("close", () => mine.delete(socket));
  }

  /** The local port that reaches `peerId`'s rpc-server, opening it when needed. */
  portFor(peerId: string): Promise<number> {
    const open = this.listeners.get(peerId);
    if (open) return open.port;
    const server = createServer({ allowHalfOpen: true, noDelay: true }, (socket) => void this.outgoing(peerId, socket));
    const port = new Promise<number>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve((server.address() as { port: number }).port));
    });
    this.listeners.set(peerId, { server, port });
    return port;
  }

  /** Peers we hold a port or connections for. */
  peers(): string[] {
    return [...new Set([...this.listeners.keys(), ...this.peerSockets.keys()])];
  }

  private async outgoing(peerId: string, socket: Socket): Promise<void> {
    this.track(socket, peerId);
    socket.setNoDelay(true);
    const c = this.countersOf(peerId);
    if (await this.outgoingDirect(peerId, socket, c)) return;
    let stream: Stream | undefined;
    try {
      stream = await this.opts.openStream(peerId, StreamKind.RPC);
    } catch (err) {
      this.opts.log.warn("rpc tunnel could not open a stream", { peer: shortId(peerId), error: (err as Error).message });
    }
    if (!stream || socket.destroyed) {
      socket.destroy();
      if (stream) await stream.send.reset(1).catch(() => undefined);
      return;
    }
    c.connectionsOut++;
    await Promise.all([socketToQuic(socket, stream.send, c.toPeer), quicToSocket(stream.recv, socket, c.fromPeer)]);
  }

  /** Carries the connection over the peer's direct path; false when there is none (use QUIC). */
  private async outgoingDirect(peerId: string, socket: Socket, c: PeerTunnelCounters): Promise<boolean> {
    const failedAt = this.directFailedAt.get(peerId);
    if (failedAt !== undefined && Date.now() - failedAt < DIRECT_RETRY_MS) return false;
    // The socket stays paused (no 'data' listener yet) until one of the pumps takes it.
    const connecting = this.opts.connectDirect?.(peerId);
    if (!connecting) return false;
    let direct: Socket;
    try {
      direct = await connecting;
    } catch (err) {
      this.directFailedAt.set(peerId, Date.now());
      this.opts.log.warn("direct rpc path failed; using the mesh connection", { peer: shortId(peerId), error: (err as Error).message });
      return false;
    }
    this.track(direct, peerId);
    if (socket.destroyed) return direct.destroy(), true;
    c.connectionsOut++;
    c.direct = true;
    await Promise.all([socketToSocket(socket, direct, c.toPeer), socketToSocket(direct, socket, c.fromPeer)]);
    return true;
  }

  /** Counters and rewriter for a direct connection from a peer's host (the worker side of the direct path). */
  forHost(peerId: string) {
    const c = this.countersOf(peerId);
    const rewriter = new RpcRequestRewriter(this.opts.rewrites, c);
    return {
      fromHost: c.fromPeerHost,
      toHost: c.toPeerHost,
      rewriter,
      /** A place among the member's sessions (`rpc-sessions.ts`); undefined when it holds its share. */
      admit: (close: () => void) => this.admit(peerId, rewriter, close),
      onConnection: (sockets: Socket[]) => {
        c.connectionsIn++;
        for (const s of sockets) this.track(s, peerId);
      },
    };
  }

  private admit(peerId: string, rewriter: RpcRequestRewriter, close: () => void): RpcSession | undefined {
    if (this.opts.mayUseRpc && !this.opts.mayUseRpc(peerId)) {
      this.warnRefused({ peer: shortId(peerId) });
      return undefined;
    }
    const session = this.sessions.take(peerId, () => rewriter.allocated, () => {
      this.opts.log.warn("closed an rpc session that allocated nothing in its setup time", { peer: shortId(peerId), setup_s: RPC_SETUP_MS / 1000 });
      close();
    });
    if (!session) return undefined;
    const c = this.countersOf(peerId);
    c.sessionsIn = this.sessions.of(peerId);
    return {
      served: session.served,
      release: () => {
        session.release();
        c.sessionsIn = this.sessions.of(peerId);
      },
    };
  }

  /** A stream a peer's host opened to our rpc-server. */
  async incoming(peerId: string, stream: Stream): Promise<void> {
    const refuse = async () => {
      await stream.send.reset(3).catch(() => undefined);
      await stream.recv.stop(3).catch(() => undefined);
    };
    const port = this.opts.rpcPort();
    if (!port) return refuse();
    const c = this.countersOf(peerId);
    const rewriter = new RpcRequestRewriter(this.opts.rewrites, c);
    let socket: Socket | undefined;
    const session = this.admit(peerId, rewriter, () => {
      socket?.destroy();
      void refuse();
    });
    if (!session) return refuse();
    try {
      socket = createConnection({ host: "127.0.0.1", port, allowHalfOpen: true, noDelay: true });
      this.track(socket, peerId);
      const connected = await new Promise<boolean>((resolve) => {
        socket!.once("connect", () => resolve(true));
        socket!.once("error", () => resolve(false));
      });
      if (!connected) return await refuse();
      c.connectionsIn++;
      const onError = (err: Error) => this.opts.log.warn("rpc tunnel closed a connection", { peer: shortId(peerId), error: err.message });
      await Promise.all([quicToSocket(stream.recv, socket, c.fromPeerHost, rewriter, onError), socketToQuic(socket, stream.send, noticingFirst(c.toPeerHost, session.served))]);
    } finally {
      session.release();
    }
  }

  /** Closes the port to a peer that left, and every connection to or from it. */
  closeFor(peerId: string): void {
    const open = this.listeners.get(peerId);
    this.listeners.delete(peerId);
    open?.server.close();
    for (const s of this.peerSockets.get(peerId) ?? []) s.destroy();
    this.peerSockets.delete(peerId);
  }

  close(): void {
    for (const id of this.peers()) this.closeFor(id);
  }
}
