/**
 * Where a bulk stream to a peer goes (a model copy's, a conversation's KV cache's): over the peer's
 * direct path (TLS, off the iroh binding, which moves bulk bytes at a fraction of a socket's speed)
 * when it serves that purpose there, else over the mesh connection. A direct connection that fails
 * sends that peer's streams of the purpose over the mesh for a while, as the RPC tunnels do. Each
 * stream comes with the path it took: a copy over the mesh connection may be slower than
 * downloading the model afresh (`copy-source.ts`), and the fetcher measures only those.
 */
import type { Socket } from "node:net";
import type { Log } from "../base/log.ts";
import type { Stream } from "../streams/stream.ts";
import { socketStream } from "../tunnel/socket-stream.ts";
import { shortId } from "../base/short-id.ts";

/** After a failed direct connection, a peer's streams of that purpose go over the mesh for this long. */
export const DIRECT_RETRY_MS = 60_000;

/** The direct TLS path, or the mesh's QUIC connection. */
export type StreamPath = "direct" | "mesh";

/** A stream to a peer and the path it goes over. */
export interface PathStream {
  stream: Stream;
  path: StreamPath;
}

export interface PeerStreamOptions {
  /** What the streams carry, for the log ("model copies", "KV caches"). */
  what: string;
  /** A proved direct connection for this purpose, or undefined when the peer offers none. */
  direct: (peerId: string) => Promise<Socket> | undefined;
  /** A stream of this purpose over the mesh connection (its kind written), undefined when the peer is gone. */
  mesh: (peerId: string) => Promise<Stream | undefined>;
  log: Log;
  now?: () => number;
}

export function peerStreamOpener(o: PeerStreamOptions): (peerId: string) => Promise<PathStream | undefined> {
  const failedAt = new Map<string, number>();
  /** The path last used to each peer: said in the log when it changes, not on every stream. */
  const lastPath = new Map<string, StreamPath>();
  const now = o.now ?? Date.now;
  const using = (stream: Stream, peerId: string, path: StreamPath): PathStream => {
    if (lastPath.get(peerId) !== path) o.log.info(`${o.what} from this peer go over the ${path === "direct" ? "direct path (TLS)" : "mesh connection"}`, { peer: shortId(peerId) });
    lastPath.set(peerId, path);
    return { stream, path };
  };
  return async (peerId) => {
    const failed = failedAt.get(peerId);
    const connecting = failed !== undefined && now() - failed < DIRECT_RETRY_MS ? undefined : o.direct(peerId);
    if (connecting) {
      try {
        return using(socketStream(await connecting), peerId, "direct");
      } catch (err) {
        failedAt.set(peerId, now());
        o.log.warn(`${o.what} over the direct path failed; using the mesh connection`, { peer: shortId(peerId), error: (err as Error).message });
      }
    }
    const stream = await o.mesh(peerId);
    return stream && using(stream, peerId, "mesh");
  };
}
