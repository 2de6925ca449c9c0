/**
 * A report without a payload ("this moved") that the parts built after its reporter subscribe to:
 * whoever reports needs no handle on who listens, so nothing is connected after it is built.
 */
export class Signal {
  private readonly listeners = new Set<() => void>();

  emit(): void {
    for (const listener of this.listeners) listener();
  }

  /** Hears every emit from now on; the function returned stops it. */
  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }
}
