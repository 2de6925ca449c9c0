/**
 * How many of something each key (a member, a source address) holds now, with the key gone when it
 * holds none: the bounds per source all count this way.
 */
export class KeyCounts {
  private readonly counts = new Map<string, number>();

  of(key: string): number {
    return this.counts.get(key) ?? 0;
  }

  add(key: string, by = 1): void {
    this.counts.set(key, this.of(key) + by);
  }

  remove(key: string, by = 1): void {
    const left = this.of(key) - by;
    if (left > 0) this.counts.set(key, left);
    else this.counts.delete(key);
  }
}
