/**
 * Waiting on conditions with deadlines, never on fixed sleeps: a test on a loaded 2-core machine
 * takes as long as it takes, up to a deadline that says what it was waiting for when it fails.
 */

export interface WaitOptions {
  timeoutMs?: number;
  /** What the wait is for, in the error when the deadline passes (a function when it names the last value seen). */
  what: string | (() => string);
  intervalMs?: number;
}

/** Resolves with the first truthy value `probe` returns; errors thrown by `probe` count as "not yet". */
export async function waitFor<T>(probe: () => T | Promise<T>, opts: WaitOptions): Promise<NonNullable<T>> {
  const deadline = Date.now() + (opts.timeoutMs ?? 30_000);
  let lastError: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v) return v as NonNullable<T>;
    } catch (err) {
      lastError = err;
    }
    if (Date.now() > deadline) {
      const why = lastError instanceof Error ? ` (last error: ${lastError.message})` : "";
      throw new Error(`timed out after ${opts.timeoutMs ?? 30_000} ms waiting for ${typeof opts.what === "function" ? opts.what() : opts.what}${why}`);
    }
    await Bun.sleep(opts.intervalMs ?? 50);
  }
}

/** Races a promise against a deadline. */
export async function withDeadline<T>(p: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: Timer | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)), timeoutMs);
  });
  try {
    return await Promise.race([p, deadline]);
  } finally {
    clearTimeout(timer);
  }
}
