/**
 * A report ("this moved", "this model was unloaded, and why") that the parts built after its
 * reporter subscribe to: whoever reports needs no handle on who listens, so nothing is connected
 * after it is built.
 */
export class Signal<Args extends unknown[] = []> {
  private readonly listeners = new Set<(...args: Args) => void>();

  emit(...args: Args): void {
    for (const listener of this.listeners) listener(...args);
  }

  /** Hears every emit from now on; the function returned stops it. */
  subscribe(listener: (...args: Args) => void): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }
}
