/**
 * A bench that cannot finish must say so and fail, never hang: every wait in a bench has its own
 * deadline, and this is the last one, over the whole run. When it fires it names what the bench was
 * doing, runs the bench's cleanup (itself bounded) and exits 1.
 */

let doing = "starting";

/** What the bench is doing now, for the message if the watchdog fires. */
export function step(what: string): void {
  doing = what;
  console.error(`[bench] ${what}`);
}

export function watchdog(limitMs: number, cleanup: () => Promise<void>): void {
  const timer = setTimeout(async () => {
    console.error(`bench: gave up after ${Math.round(limitMs / 1000)} s, while ${doing}`);
    const cleaned = await Promise.race([cleanup().then(() => true, () => false), Bun.sleep(30_000).then(() => false)]);
    if (!cleaned) console.error("bench: cleanup did not finish within 30 s");
    process.exit(1);
  }, limitMs);
  timer.unref();
}
