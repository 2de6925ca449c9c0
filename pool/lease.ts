/**
 * What a request holds while a server answers it: the server (counted on it, so nothing evicts
 * it) and, for a request that generates, one of its slots. Both go back once, whichever way the
 * request ends.
 */
import type { Lease } from "./pool-types.ts";
import type { WrappedServer } from "./wrapped-server.ts";

/**
 * The lease on `server`, which already counts the request: with a slot taken in `source`'s turn
 * when there is a source, none otherwise. A request refused a slot (a full queue, a client gone)
 * is no longer counted on the server.
 */
export async function takeLease(server: WrappedServer, source: string | undefined, signal: AbortSignal | undefined): Promise<Lease> {
  let slot: (() => void) | undefined;
  if (source !== undefined) {
    try {
      slot = await server.queue.acquire(source, signal);
    } catch (err) {
      server.release();
      throw err;
    }
  }
  let released = false;
  return {
    server,
    release: () => {
      if (released) return;
      released = true;
      slot?.();
      server.release();
    },
  };
}
