/**
 * The direct RPC path between peers that can reach each other: TLS 1.3 over TCP instead of a QUIC
 * stream, for the round trips of generation (a QUIC write through the binding costs ~0.1-0.2 ms;
 * a TLS socket in Bun ~20 us). The worker listens with a fresh self-signed certificate whose hash
 * it announces; the host pins that hash, then proves it is a member of this mesh in its first
 * bytes (`direct-auth.ts`). Only then does the worker connect it to its rpc-server.
 */
import { createConnection, type Socket } from "node:net";
import tls from "node:tls";
import type { Log } from "../log.ts";
import { decodeDirectHello, directMac, encodeDirectHello, verifyDirectMac } from "./direct-auth.ts";
import { normalizeFingerprint, type DirectIdentity } from "./direct-identity.ts";
import { socketToSocket, type ChunkRewriter, type DirectionCounter } from "./pump.ts";

const HELLO_DEADLINE_MS = 5_000;

export interface DirectServerOptions {
  identity: DirectIdentity;
  host: string;
  selfId: string;
  secret: Uint8Array;
  /** Whether a node id is a peer of ours right now. */
  isPeer: (nodeId: string) => boolean;
  rpcPort: () => number | undefined;
  /** Counters and rewriter for a connection from `hostId`. */
  forHost: (hostId: string) => { fromHost: DirectionCounter; toHost: DirectionCounter; rewriter: ChunkRewriter; onConnection: (sockets: Socket[]) => void };
  log: Log;
}

export async function startDirectServer(opts: DirectServerOptions): Promise<{ port: number; close: () => void }> {
  const sockets = new Set<Socket>();
  const server = tls.createServer({ key: opts.identity.keyPem, cert: opts.identity.certPem, minVersion: "TLSv1.3" }, (socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.setNoDelay(true);
    let received = Buffer.alloc(0);
    const timer = setTimeout(() => socket.destroy(), HELLO_DEADLINE_MS);
    const onData = (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      const hello = decodeDirectHello(received);
      if ("need" in hello) return;
      socket.off("data", onData);
      clearTimeout(timer);
      if ("error" in hello || !opts.isPeer(hello.hostId) || !verifyDirectMac(directMac(opts.secret, hello.hostId, opts.selfId, opts.identity.certSha256), hello.mac)) {
        opts.log.warn("refused a direct rpc connection", { from: socket.remoteAddress, reason: "error" in hello ? hello.error : "not a member's proof" });
        return void socket.destroy();
      }
      socket.pause();
      void connectRpc(opts, hello.hostId, socket, hello.rest);
    };
    socket.on("data", onData);
    socket.on("error", () => socket.destroy());
  });
  const port = await new Promise<number>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, opts.host, () => resolve((server.address() as { port: number }).port));
  });
  return {
    port,
    close: () => {
      server.close();
      for (const s of sockets) s.destroy();
    },
  };
}

async function connectRpc(opts: DirectServerOptions, hostId: string, socket: tls.TLSSocket, early: Uint8Array): Promise<void> {
  const port = opts.rpcPort();
  if (!port) return void socket.destroy();
  const rpc = createConnection({ host: "127.0.0.1", port, noDelay: true });
  rpc.once("error", () => socket.destroy());
  await new Promise<void>((resolve) => rpc.once("connect", () => resolve()));
  const { fromHost, toHost, rewriter, onConnection } = opts.forHost(hostId);
  onConnection([socket, rpc]);
  const onError = (err: Error) => opts.log.warn("direct rpc connection closed", { peer: hostId.slice(0, 10), error: err.message });
  if (early.length) socket.unshift(Buffer.from(early));
  await Promise.all([socketToSocket(socket, rpc, fromHost, rewriter, onError), socketToSocket(rpc, socket, toHost)]);
}

export interface DirectTarget {
  host: string;
  port: number;
  certSha256: string;
}

/** Opens a direct connection to a worker: pinned certificate, then our proof. Rejects if either fails. */
export function connectDirect(target: DirectTarget, hostId: string, workerId: string, secret: Uint8Array): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    // The certificate is self-signed by design; it is checked by its pinned hash below.
    const socket = tls.connect({ host: target.host, port: target.port, rejectUnauthorized: false, minVersion: "TLSv1.3" });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error("direct connection timed out"));
    }, HELLO_DEADLINE_MS);
    socket.once("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    socket.once("secureConnect", () => {
      clearTimeout(timer);
      if (normalizeFingerprint(socket.getPeerCertificate().fingerprint256) !== target.certSha256) {
        socket.destroy();
        return reject(new Error("the worker's certificate is not the one it announced"));
      }
      socket.setNoDelay(true);
      socket.write(encodeDirectHello(hostId, directMac(secret, hostId, workerId, target.certSha256)));
      resolve(socket);
    });
  });
}
