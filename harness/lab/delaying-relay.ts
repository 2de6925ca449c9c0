/**
 * A user-space TCP relay that holds every chunk `delayMs` before passing it on, each way: latency
 * for the lab's TCP paths, since this kernel has no netem. Order is kept (every chunk waits the
 * same time); a side that closes closes the other once its delayed bytes are through.
 */
import type { Socket } from "bun";

interface Side {
  peer: Socket<Side> | undefined;
  /** Chunks for `peer` that arrived before it connected. */
  early: Uint8Array[];
  /** Bytes `peer` did not take yet (its buffer was full). */
  backlog: Uint8Array[];
  ended: boolean;
  /** Delayed writes still to run towards this socket. */
  inFlight: number;
  closeAfter: boolean;
}

function flush(s: Socket<Side>): void {
  const d = s.data;
  while (d.backlog.length > 0) {
    const chunk = d.backlog[0]!;
    const n = s.write(chunk);
    if (n < chunk.length) {
      d.backlog[0] = chunk.subarray(n);
      return;
    }
    d.backlog.shift();
  }
  if (d.closeAfter && d.inFlight === 0) s.end();
}

function send(to: Socket<Side>, chunk: Uint8Array, delayMs: number): void {
  const copy = new Uint8Array(chunk);
  to.data.inFlight++;
  setTimeout(() => {
    to.data.inFlight--;
    to.data.backlog.push(copy);
    flush(to);
  }, delayMs);
}

function endAfterDelay(to: Socket<Side>): void {
  to.data.closeAfter = true;
  flush(to);
}

export async function delayingRelay(opts: {
  listen: { host: string; port?: number };
  target: { host: string; port: number };
  delayMs: number;
}): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket<Side>>();
  const fresh = (): Side => ({ peer: undefined, early: [], backlog: [], ended: false, inFlight: 0, closeAfter: false });
  const server = Bun.listen<Side>({
    hostname: opts.listen.host,
    port: opts.listen.port ?? 0,
    socket: {
      open(client) {
        client.data = fresh();
        sockets.add(client);
        void Bun.connect<Side>({
          hostname: opts.target.host,
          port: opts.target.port,
          socket: {
            open(upstream) {
              upstream.data = fresh();
              upstream.data.peer = client;
              sockets.add(upstream);
              client.data.peer = upstream;
              for (const c of client.data.early) send(upstream, c, opts.delayMs);
              client.data.early = [];
              if (client.data.ended) endAfterDelay(upstream);
            },
            data(upstream, chunk) {
              send(client, chunk, opts.delayMs);
            },
            drain: flush,
            close(upstream) {
              sockets.delete(upstream);
              setTimeout(() => endAfterDelay(client), opts.delayMs);
            },
            connectError() {
              client.end();
            },
          },
        }).catch(() => client.end());
      },
      data(client, chunk) {
        const up = client.data.peer;
        if (up) send(up, chunk, opts.delayMs);
        else client.data.early.push(new Uint8Array(chunk));
      },
      drain: flush,
      close(client) {
        sockets.delete(client);
        client.data.ended = true;
        const up = client.data.peer;
        if (up) setTimeout(() => endAfterDelay(up), opts.delayMs);
      },
    },
  });
  return {
    port: server.port,
    close: async () => {
      server.stop(true);
      for (const s of sockets) s.end();
    },
  };
}
