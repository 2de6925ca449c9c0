/**
 * The direct path between peers that can reach each other: TLS 1.3 over TCP instead of a QUIC
 * stream, for the round trips of generation (a QUIC write through the binding costs ~0.1-0.2 ms;
 * a TLS socket in Bun ~20 us), and for model copies and conversations' KV caches (bulk bytes, off
 * the binding). A node listens with a fresh self-signed certificate whose hash it announces; the
 * peer pins that hash, then proves it is a member of this mesh, and says what for, in its first
 * bytes (`direct-auth.ts`). Only then is it connected to the rpc-server, or answered as a MODEL or
 * KV stream from it is.
 *
 * The port is open to whoever can reach the `--quic-bind` host, so until a connection has proved
 * itself it is bounded: a handshake deadline counted from the TCP accept (TLS and the proof within
 * it), a few unproved connections per source, and a cap on all unproved ones. Proved connections
 * count against neither: they are bounded by membership, and a stranger must never be able to keep
 * a member off this path by holding the slots.
 */
import ipaddr from "ipaddr.js";
import { createConnection, type Socket } from "node:net";
import tls from "node:tls";
import type { Log } from "../base/log.ts";
import { KeyCounts } from "../base/key-counts.ts";
import { throttledWarning } from "../base/throttled-log.ts";
import type { Stream } from "../streams/stream.ts";
import { signedBy, type Signer } from "../mesh/transport.ts";
import { decodeDirectHello, directMac, directStatement, encodeDirectHello, verifyDirectMac, type DirectHello, type DirectPurpose } from "./direct-auth.ts";
import { normalizeFingerprint, type DirectIdentity } from "./direct-identity.ts";
import { noticingFirst, socketToSocket, type ChunkRewriter, type DirectionCounter } from "./pump.ts";
import type { RpcSession } from "./rpc-sessions.ts";
import { socketStream } from "./socket-stream.ts";
import { shortId } from "../base/short-id.ts";

/** From the TCP accept to a verified proof; also how long a host waits for the worker's TLS. */
export const HANDSHAKE_DEADLINE_MS = 5_000;
/**
 * Connections not yet proved, at once. A member's proof comes within milliseconds of its accept,
 * so this only ever fills with sockets that hold a slot for the whole deadline.
 */
export const MAX_UNPROVED_CONNECTIONS = 64;
/** Unproved connections from one source (an IPv4 address or an IPv6 /64), so one host cannot fill the cap alone. */
export const MAX_UNPROVED_PER_SOURCE = 8;
/** The purposes of a direct connection that carry one of the mesh's own streams (an RPC one carries rpc-server's bytes). */
export type StreamPurpose = Exclude<DirectPurpose, "rpc">;
/** What answers a member's direct connection of each purpose (the node's peer protocols, `node/peer-protocols.ts`). */
export interface DirectStreams {
  /** The handler of a purpose, as a mesh stream of its kind would be answered, and how many such connections one member may have served at once; none: closed. */
  forPurpose(purpose: StreamPurpose): { serve: (peerId: string, stream: Stream) => unknown; perMember: number } | undefined;
}
/** The byte that tells a peer its stream connection was taken (RPC connections have none: rpc-server speaks first). */
const STREAM_ACCEPTED = Uint8Array.of(1);

/**
 * What the per-source cap counts by: an IPv4 address (also when mapped into IPv6), or the /64 of an
 * IPv6 one, since a single host is commonly handed a whole /64 and can pick any address in it.
 */
export function sourceKey(address: string | undefined): string {
  if (!address) return "";
  let ip: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    // `process` reads an IPv4-mapped IPv6 address as the IPv4 one.
    ip = ipaddr.process(address.split("%")[0]!);
  } catch {
    return address;
  }
  if (ip.kind() === "ipv4") return ip.toString();
  return `${ip.toNormalizedString().split(":").slice(0, 4).join(":")}::/64`;
}

export interface DirectServerOptions {
  identity: DirectIdentity;
  host: string;
  selfId: string;
  secret: Uint8Array;
  /** Whether a node id is a peer of ours right now. */
  isPeer: (nodeId: string) => boolean;
  rpcPort: () => number | undefined;
  /** Counters and rewriter for a connection from `hostId`, and its place among that member's RPC sessions (none: it holds its share). */
  forHost: (hostId: string) => {
    fromHost: DirectionCounter;
    toHost: DirectionCounter;
    rewriter: ChunkRewriter;
    admit: (close: () => void) => RpcSession | undefined;
    onConnection: (sockets: Socket[]) => void;
  };
  /** Answers a member's connection of each purpose as that kind of mesh stream from it would be; a purpose with none is closed. */
  streams: DirectStreams;
  log: Log;
}

export async function startDirectServer(opts: DirectServerOptions): Promise<{ port: number; close: () => void }> {
  const sockets = new Set<Socket>();
  /** Connections not yet proved, oldest first: their deadline and the source they count against. */
  const unproved = new Map<Socket, { deadline: Timer; source: string }>();
  const unprovedBySource = new KeyCounts();
  /** Stream connections by purpose and member. */
  const streamConnections = new KeyCounts();
  /** Takes a socket off the unproved ones (proved, closed or evicted); once only. */
  const settle = (socket: Socket) => {
    const entry = unproved.get(socket);
    if (!entry) return;
    clearTimeout(entry.deadline);
    unproved.delete(socket);
    unprovedBySource.remove(entry.source);
  };
  const warnRefusedProof = throttledWarning(opts.log, "refused direct connections without a member's proof");
  const warnSourceFull = throttledWarning(opts.log, "refused direct connections over the cap per source");
  const warnEvicted = throttledWarning(opts.log, "closed the oldest unproved direct connections to make room");
  const server = tls.createServer({ key: opts.identity.keyPem, cert: opts.identity.certPem, minVersion: "TLSv1.3" }, (socket) => {
    socket.setNoDelay(true);
    let received = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const hello = decodeDirectHello(received);
      if ("need" in hello) return;
      socket.off("data", onData);
      const refused = "error" in hello ? hello.error : whyNotProved(opts, hello);
      if (refused !== undefined || "error" in hello) {
        warnRefusedProof({ from: socket.remoteAddress, reason: refused ?? "" });
        return void socket.destroy();
      }
      settle(socket);
      socket.pause();
      if (hello.purpose === "rpc") return void connectRpc(opts, hello.hostId, socket, hello.rest);
      const peerId = hello.hostId;
      const served = opts.streams.forPurpose(hello.purpose);
      const key = `${hello.purpose} ${peerId}`;
      if (!served || streamConnections.of(key) >= served.perMember) return void socket.destroy();
      // Counted until the socket is gone, not until the answer is: a peer that keeps its side
      // open holds its place (for END_GRACE_MS at most) rather than a socket beyond the cap.
      streamConnections.add(key);
      socket.once("close", () => streamConnections.remove(key));
      // Taken: the peer waits for this byte, so a refusal (not a member yet, over the cap) reads as
      // a failed connection it can fall back from, not as a copy cut off mid-request.
      socket.write(STREAM_ACCEPTED);
      const stream = socketStream(socket, hello.rest);
      void Promise.resolve()
        .then(() => served.serve(peerId, stream))
        .catch(() => stream.send.reset(1))
        .finally(() => void stream.recv.stop(0));
    };
    socket.on("data", onData);
    socket.on("error", () => socket.destroy());
  });
  // 'connection' comes at the TCP accept, before TLS; Bun hands the same socket to the listener
  // above once TLS is done (checked), so the deadline set here covers TLS and the proof together.
  server.on("connection", (socket: Socket) => {
    const source = sourceKey(socket.remoteAddress);
    const fromSource = unprovedBySource.of(source);
    if (fromSource >= MAX_UNPROVED_PER_SOURCE) {
      warnSourceFull({ from: socket.remoteAddress, cap: MAX_UNPROVED_PER_SOURCE });
      return void socket.destroy();
    }
    // Full with sockets from many sources: the oldest goes rather than the newcomer. A member proves
    // itself within milliseconds, so the oldest is almost always one sitting out its deadline, and a
    // flood must now outpace a member's handshake (64 accepts within it) to keep members out, where
    // refusing newcomers let 13 a second from 8 sources do it.
    if (unproved.size >= MAX_UNPROVED_CONNECTIONS) {
      const oldest = unproved.keys().next().value!;
      warnEvicted({ from: oldest.remoteAddress, cap: MAX_UNPROVED_CONNECTIONS });
      settle(oldest);
      oldest.destroy();
    }
    sockets.add(socket);
    unproved.set(socket, { deadline: setTimeout(() => socket.destroy(), HANDSHAKE_DEADLINE_MS), source });
    unprovedBySource.add(source);
    socket.once("close", () => {
      sockets.delete(socket);
      settle(socket);
    });
  });
  // A failed or timed-out TLS handshake is reported here; Bun leaves that socket open otherwise.
  server.on("tlsClientError", (_err: Error, socket: Socket | undefined) => socket?.destroy());
  const port = await new Promise<number>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, opts.host, () => resolve((server.address() as { port: number }).port));
  });
  return {
    port,
    close: () => {
      server.close();
      for (const s of sockets) s.destroy();
      for (const { deadline } of unproved.values()) clearTimeout(deadline);
    },
  };
}

/** Why a hello proves no member speaking for itself (a member's MAC, signed by the id it names), or undefined when it does. */
function whyNotProved(opts: DirectServerOptions, hello: Exclude<DirectHello, { need: number } | { error: string }>): string | undefined {
  if (!opts.isPeer(hello.hostId)) return "not a member's proof";
  const statement = directStatement(hello.hostId, opts.selfId, opts.identity.certSha256, hello.purpose);
  if (!verifyDirectMac(directMac(opts.secret, hello.hostId, opts.selfId, opts.identity.certSha256, hello.purpose), hello.mac)) return "not a member's proof";
  // The mesh secret is every member's: only the key of the id it names makes it that member's.
  if (!signedBy(hello.hostId, statement, hello.signature)) return "a member's proof, not signed by the member it names";
  return undefined;
}

async function connectRpc(opts: DirectServerOptions, hostId: string, socket: tls.TLSSocket, early: Uint8Array): Promise<void> {
  const port = opts.rpcPort();
  if (!port) return void socket.destroy();
  const { fromHost, toHost, rewriter, admit, onConnection } = opts.forHost(hostId);
  // Closing the member's socket ends the pump, which destroys the rpc-server one too.
  const session = admit(() => socket.destroy());
  if (!session) return void socket.destroy();
  socket.once("close", session.release);
  const rpc = createConnection({ host: "127.0.0.1", port, noDelay: true });
  const connected = await new Promise<boolean>((resolve) => {
    rpc.once("connect", () => resolve(true));
    rpc.once("error", () => resolve(false));
  });
  if (!connected) return void socket.destroy();
  onConnection([socket, rpc]);
  const onError = (err: Error) => opts.log.warn("direct rpc connection closed", { peer: shortId(hostId), error: err.message });
  if (early.length) socket.unshift(Buffer.from(early));
  await Promise.all([socketToSocket(socket, rpc, fromHost, rewriter, onError), socketToSocket(rpc, socket, noticingFirst(toHost, session.served))]);
}

export interface DirectTarget {
  host: string;
  port: number;
  certSha256: string;
}

/** The host to reach a peer's direct path at: the IP of its first IPv4 address, else IPv6. */
export function directHost(addresses: readonly string[]): string | undefined {
  const v4 = addresses.find((a) => !a.startsWith("["));
  if (v4) return v4.slice(0, v4.lastIndexOf(":"));
  const v6 = addresses[0];
  return v6 ? v6.slice(1, v6.lastIndexOf("]")) : undefined;
}

/**
 * Where to reach a peer's direct path (for RPC and model copies alike), from its announcement;
 * undefined when it offers none we speak (a node from before signed hellos offers none).
 */
export function directTarget(peer: { addresses: readonly string[]; signedDirect?: { port: number; certSha256: string } | undefined } | undefined): DirectTarget | undefined {
  const offer = peer?.signedDirect;
  const host = peer && directHost(peer.addresses);
  if (!offer || !host) return undefined;
  return { host, port: offer.port, certSha256: offer.certSha256 };
}

/** Opens a direct connection to a peer for `purpose`: pinned certificate, then our proof. Rejects if either fails. */
export function connectDirect(target: DirectTarget, hostId: string, workerId: string, secret: Uint8Array, sign: Signer, purpose: DirectPurpose = "rpc"): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    // The certificate is self-signed by design; it is checked by its pinned hash below.
    const socket = tls.connect({ host: target.host, port: target.port, rejectUnauthorized: false, minVersion: "TLSv1.3" });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error("direct connection timed out"));
    }, HANDSHAKE_DEADLINE_MS);
    socket.once("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    socket.once("secureConnect", () => {
      if (normalizeFingerprint(socket.getPeerCertificate().fingerprint256) !== target.certSha256) {
        clearTimeout(timer);
        socket.destroy();
        return reject(new Error("the worker's certificate is not the one it announced"));
      }
      socket.setNoDelay(true);
      const statement = directStatement(hostId, workerId, target.certSha256, purpose);
      socket.write(encodeDirectHello(hostId, directMac(secret, hostId, workerId, target.certSha256, purpose), sign(statement), purpose));
      if (purpose === "rpc") return clearTimeout(timer), resolve(socket);
      // A stream connection is ours once the peer says it took it (within the same deadline).
      const refused = () => (clearTimeout(timer), reject(new Error("the peer closed the direct connection without taking it (not a member to it yet, or its places are full)")));
      socket.once("close", refused);
      socket.once("data", (first: Buffer) => {
        clearTimeout(timer);
        socket.off("close", refused);
        socket.pause();
        if (first[0] !== STREAM_ACCEPTED[0]) return socket.destroy(), reject(new Error("the peer answered the direct connection with something else"));
        if (first.length > 1) socket.unshift(first.subarray(1));
        resolve(socket);
      });
    });
  });
}
