/**
 * The servers a pool runs, by model: the pool alone adds and removes them; the parts that only read
 * them (the node's announcement, its view of the mesh) are handed this, not the pool. It is made
 * before the pool, so those readers, and the mesh brain the pool's loads ask about splits, can be
 * built before the pool itself.
 */
import type { WrappedServer } from "./wrapped-server.ts";

export class LoadedServers extends Map<string, WrappedServer> {
  loaded(): WrappedServer[] {
    return [...this.values()];
  }

  server(model: string): WrappedServer | undefined {
    return this.get(model);
  }
}
