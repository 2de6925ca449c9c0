/**
 * Where a model copy's streams go: over the peer's direct path (TLS, off the iroh binding, which
 * moves bulk bytes at a fraction of a socket's speed) when it serves model copies there, else over
 * the mesh connection. A direct connection that fails sends that peer's copies over the mesh for a
 * while, as the RPC tunnels do. Each stream comes with the path it took: a copy over the mesh
 * connection may be slower than downloading the model afresh (`copy-source.ts`), and the fetcher
 * measures only those.
 */
import type { Socket } from "node:net";
import type { Log } from "../log.ts";
import type { Stream } from "../streams/stream.ts";
import { socketStream } from "../tunnel/socket-stream.ts";

/** After a failed direct connection, a peer's copies go over the mesh for this long. */
export const DIRECT_MODEL_RETRY_MS = 60_000;

/** The direct TLS path, or the mesh's QUIC connection. */
export type ModelPath = "direct" | "mesh";

/** A MODEL stream to a peer and the path it goes over. */
export interface ModelStream {
  stream: Stream;
  path: ModelPath;
}

export interface ModelStreamOptions {
  /** A proved direct connection for model copies, or undefined when the peer offers none. */
  direct: (peerId: string) => Promise<Socket> | undefined;
  /** A MODEL stream over the mesh connection (its kind written), undefined when the peer is gone. */
  mesh: (peerId: string) => Promise<Stream | undefined>;
  log: Log;
  now?: () => number;
}

export function modelStreamOpener(o: ModelStreamOptions): (peerId: string) => Promise<ModelStream | undefined> {
  const failedAt = new Map<string, number>();
  /** The path last used to each peer: said in the log when it changes, not on every file. */
  const lastPath = new Map<string, ModelPath>();
  const now = o.now ?? Date.now;
  const using = (stream: Stream, peerId: string, path: ModelPath): ModelStream => {
    if (lastPath.get(peerId) !== path) o.log.info(`model copies from this peer go over the ${path === "direct" ? "direct path (TLS)" : "mesh connection"}`, { peer: peerId.slice(0, 10) });
    lastPath.set(peerId, path);
    return { stream, path };
  };
  return async (peerId) => {
    const failed = failedAt.get(peerId);
    const connecting = failed !== undefined && now() - failed < DIRECT_MODEL_RETRY_MS ? undefined : o.direct(peerId);
    if (connecting) {
      try {
        return using(socketStream(await connecting), peerId, "direct");
      } catch (err) {
        failedAt.set(peerId, now());
        o.log.warn("model copy over the direct path failed; using the mesh connection", { peer: peerId.slice(0, 10), error: (err as Error).message });
      }
    }
    const stream = await o.mesh(peerId);
    return stream && using(stream, peerId, "mesh");
  };
}
