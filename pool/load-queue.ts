/**
 * The pool's serial queue and its wake-ups: loads and unloads run one at a time, in order, and a
 * load that waits for busy servers to go idle sleeps until the next change of any server.
 */
export class LoadQueue {
  private tail: Promise<unknown> = Promise.resolve();
  private waiters: (() => void)[] = [];

  /** Runs `task` after everything queued before it; a failure does not stop the queue. */
  run<T>(task: () => Promise<T>): Promise<T> {
    const run = this.tail.then(task);
    this.tail = run.catch(() => undefined);
    return run;
  }

  /** Resolves once everything queued so far has run, or after `ms`. */
  settled(ms: number): Promise<unknown> {
    return Promise.race([this.tail, Bun.sleep(ms)]);
  }

  /** Wakes what waits for a change (a server went idle, stopped, or loaded). */
  wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }

  /** The next change. */
  nextChange(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }
}
