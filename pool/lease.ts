/**
 * What a request holds while a server answers it: the server (counted on it, so nothing evicts
 * it) and, for a request that generates, one of its slots. Both go back once, whichever way the
 * request ends.
 */
import type { Lease } from "./pool-types.ts";
import type { WrappedServer } from "./wrapped-server.ts";
import type { Admission } from "./slot-queue.ts";

/**
 * The lease on `server`, which already counts the request: with a slot taken in `source`'s turn
 * when there is a source (or a place ahead of one: `SlotQueue.admit`), none otherwise. A request refused a slot (a full queue, a client gone)
 * is no longer counted on the server.
 */
export async function takeLease(server: WrappedServer, source: string | undefined, signal: AbortSignal | undefined): Promise<Lease> {
  let slot: Admission | undefined;
  if (source !== undefined) {
    try {
      slot = await server.queue.admit(source, signal);
    } catch (err) {
      server.release();
      throw err;
    }
  }
  let released = false;
  const lease: Lease = {
    server,
    release: () => {
      if (released) return;
      released = true;
      slot?.release();
      server.release();
    },
  };
  if (slot?.revoked) {
    lease.revoked = slot.revoked;
    lease.begun = slot.begun;
  }
  return lease;
}
