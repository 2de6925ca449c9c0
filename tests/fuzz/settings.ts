/**
 * How every property in tests/fuzz runs: from a fixed seed (`FUZZ_SEED`, else a constant), a
 * bounded number of runs (`FUZZ_RUNS` multiplies them, for a longer hunt by hand), and a failure
 * that says which seed and path replay it. Same seed, same inputs: CI sees no flakes from here.
 */
import fc from "fast-check";

const DEFAULT_SEED = 12_012;

function envInt(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined || text === "") return fallback;
  const n = Number(text);
  if (!Number.isSafeInteger(n)) throw new Error(`${name} must be a whole number, got "${text}"`);
  return n;
}

export const FUZZ_SEED = envInt("FUZZ_SEED", DEFAULT_SEED);
const RUNS_FACTOR = Math.max(1, envInt("FUZZ_RUNS", 1));

export interface FuzzOptions {
  /** Runs at the default factor; each property must finish in a few seconds on a loaded 2-core machine. */
  runs: number;
  /** An async run that takes longer than this fails as a hang (ms). */
  hangMs?: number;
}

function params<T>(opts: FuzzOptions): fc.Parameters<T> {
  return { seed: FUZZ_SEED, numRuns: opts.runs * RUNS_FACTOR, timeout: opts.hangMs };
}

/** fast-check names the seed, path and counterexample; this adds what failed and the command that replays it. */
function withReplay(err: unknown): never {
  const message = err instanceof Error ? err.message : String(err);
  const cause = err instanceof Error && err.cause instanceof Error ? `\nwhat failed: ${err.cause.message}` : "";
  throw new Error(`property failed with FUZZ_SEED=${FUZZ_SEED} (replay: FUZZ_SEED=${FUZZ_SEED} bun test tests/fuzz)\n${message}${cause}`);
}

export function holds<Ts>(property: fc.IProperty<Ts>, opts: FuzzOptions): void {
  try {
    fc.assert(property, params(opts));
  } catch (err) {
    withReplay(err);
  }
}

export async function holdsAsync<Ts>(property: fc.IAsyncProperty<Ts>, opts: FuzzOptions): Promise<void> {
  try {
    await fc.assert(property, params(opts));
  } catch (err) {
    withReplay(err);
  }
}
