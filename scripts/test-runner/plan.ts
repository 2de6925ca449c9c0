/**
 * What `npm test` runs and in which order: every test file once on the default iroh line, the mesh
 * suites again on the 0.35 line (the compatibility matrix), longest first by their last measured
 * time so the few long files start at once and the many short ones fill the gaps (longest
 * processing time first: with files this uneven the last file to end is close to the longest one).
 */

/** One `bun test` process: a file, on a line (undefined = the default line). */
export interface TestJob {
  file: string;
  line?: string;
  /** Its last measured time, or a guess by its folder when it was never measured. */
  estimateS: number;
  /** The file says it cannot share the machine (`test-runner: alone`): it runs when nothing else does. */
  alone: boolean;
}

export interface TestFile {
  /** Relative to the repository root, with forward slashes: `tests/e2e/mesh.test.ts`. */
  path: string;
  source: string;
}

/** The 0.35 line the mesh suites run again on. */
export const MATRIX_LINE = "iroh035";

/**
 * The mesh suites: every lab file, and every e2e or browser file that forms a mesh (`--join`, or
 * through `harness/mesh.ts`'s `hostAndEntry`) or dials a node as a peer (`RoguePeer`). Unit and
 * fuzz tests never touch a transport.
 */
export function isMeshSuite(file: TestFile): boolean {
  if (file.path.startsWith("tests/lab/")) return true;
  if (file.path.startsWith("tests/e2e/") || file.path.startsWith("tests/browser/")) return /--join|RoguePeer|hostAndEntry/.test(file.source);
  return false;
}

/**
 * A file that cannot share the machine says why on a line of its own:
 * `// test-runner: alone, <why>`. Nothing else does: a file flaky beside others is a bug to fix
 * (see `runAgain`).
 */
export const ALONE = /^\s*\/\/\s*test-runner:\s*alone\b/m;

/**
 * Whether a failed file is run once more, alone, after the others: the files that start real
 * processes and wait on them under the whole suite's load (e2e, lab, browser). One that passes
 * then is reported as flaky, with its first failure's output, and does not fail the run; unit and
 * fuzz files decide without processes or clocks, and a failure there is never run again.
 */
export const runAgain = (job: TestJob): boolean => /^tests\/(e2e|lab|browser)\//.test(job.file);

/** A guess for a file never measured, by its folder: it only orders the first run. */
export function guessS(path: string): number {
  if (path.startsWith("tests/lab/")) return 180;
  if (path.startsWith("tests/e2e/") || path.startsWith("tests/browser/")) return 60;
  return 2;
}

/** The key a file's time is kept under: its path, prefixed by its line when not the default one. */
export const durationKey = (job: Pick<TestJob, "file" | "line">) => (job.line ? `${job.line}:${job.file}` : job.file);

/**
 * The jobs of a run, in the order they should start. `matrix` adds the mesh suites again on the
 * 0.35 line (a whole run); `line` runs every file on that line instead (a run of chosen files
 * under MESH_TEST_TRANSPORT).
 */
export function planJobs(files: TestFile[], durations: Record<string, number>, opts: { matrix: boolean; line?: string }): TestJob[] {
  const job = (file: TestFile, line: string | undefined): TestJob => {
    const key = durationKey({ file: file.path, line });
    const measured = durations[key] ?? (line ? durations[file.path] : undefined);
    return { file: file.path, line, estimateS: measured ?? guessS(file.path), alone: ALONE.test(file.source) };
  };
  const jobs = files.map((f) => job(f, opts.line));
  if (opts.matrix && !opts.line) jobs.push(...files.filter(isMeshSuite).map((f) => job(f, MATRIX_LINE)));
  // Alone ones last, so they never hold the others back; within each, longest first, then by name
  // so two runs with the same times start in the same order.
  return jobs.sort((a, b) => Number(a.alone) - Number(b.alone) || b.estimateS - a.estimateS || durationKey(a).localeCompare(durationKey(b)));
}

/**
 * Which job may start now: the first not-alone job while others run and slots are free; an alone
 * job only once nothing runs. Returns the index in `queue`, or -1 to wait.
 */
export function nextJob(queue: readonly TestJob[], running: number, slots: number, runningAlone: boolean): number {
  if (runningAlone || running >= slots || queue.length === 0) return -1;
  const shared = queue.findIndex((j) => !j.alone);
  if (shared >= 0) return shared;
  return running === 0 ? 0 : -1;
}
