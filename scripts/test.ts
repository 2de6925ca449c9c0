#!/usr/bin/env bun
/**
 * `npm test`: makes sure the real llama.cpp is there (building it into the cache on the first run,
 * about 5 minutes on 2 cores), Chromium for the browser tests (Debian's, installed when it can
 * be) and a Python venv with the SDKs of the Python client tests (made once per set of pins),
 * then runs every test file in its own `bun test` process, several side by side, longest first
 * by their last measured times, and the mesh suites a second time on the iroh 0.35 line
 * (the compatibility matrix). Each file's line is printed as it ends (a failed file's whole output
 * with it); an e2e, lab or browser file that failed runs once more, alone, at the end (`runAgain`:
 * passing then, it is listed as flaky, not failed); then the slowest files and the totals.
 *
 *   npm test                              everything, both lines
 *   npm test -- tests/unit mesh.test.ts   files, folders or parts of a path: once, on
 *                                         MESH_TEST_TRANSPORT's line
 *   npm test -- --jobs 3                  side by side (default MESH_TEST_JOBS or 4)
 *   npm test -- --save-durations          keep this run's times in tests/durations.json
 *   npm test -- -t "a name" <files>       any bun test flag: one plain `bun test` with these args
 *
 * Most tests spend their time waiting on heartbeats, deadlines and settles, not on the CPU, so
 * more files run at once than there are cores; every test owns its ports, dirs and namespaces.
 */
import { mkdirSync, mkdtempSync, openSync, closeSync, readFileSync, readdirSync, rmSync, writeFileSync, existsSync, statSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join, relative } from "node:path";
import { provideChromium } from "./chromium-dev.ts";
import { provideDevLlama } from "./llama-dev.ts";
import { providePython } from "./python-dev.ts";
import { durationKey, nextJob, planJobs, runAgain, type TestFile, type TestJob } from "./test-runner/plan.ts";
import { fileFailed, fileLine, lastLines, parseCounts, summary, type FileResult } from "./test-runner/report.ts";

const ROOT = join(import.meta.dir, "..");
const COMMITTED_DURATIONS = join(ROOT, "tests", "durations.json");
const CACHED_DURATIONS = join(process.env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "mesh", "test-durations.json");
/** The outer bound of one file: a file that hangs is stopped and failed instead of holding the run. */
const FILE_LIMIT_S = Number(process.env.MESH_TEST_FILE_LIMIT_S ?? 900);
const CHILD_TAIL_LINES = 40;

const argv = process.argv.slice(2);
const flag = (name: string) => {
  const i = argv.indexOf(name);
  if (i < 0) return undefined;
  const [, value] = argv.splice(i, 2);
  return value;
};
const saveDurations = argv.includes("--save-durations") ? (argv.splice(argv.indexOf("--save-durations"), 1), true) : false;
const slots = Math.max(1, Number(flag("--jobs") ?? process.env.MESH_TEST_JOBS ?? 4));

const llama = await provideDevLlama();
console.error(`llama.cpp binaries: ${llama.dir}`);
const chromium = await provideChromium();
console.error("path" in chromium ? `chromium: ${chromium.path}` : `chromium: none (${chromium.missing}); the browser tests skip`);
const python = await providePython();
console.error("path" in python ? `python clients: ${python.path}` : `python clients: none (${python.missing}); the Python client tests skip`);
const env = {
  ...process.env,
  MESH_LLAMA_DIR: llama.dir,
  ...("path" in chromium ? { MESH_CHROMIUM: chromium.path } : {}),
  ...("path" in python ? { MESH_PYTHON: python.path } : {}),
};
// End-to-end tests start real processes on a loaded machine; each waits on conditions with its
// own deadlines, and this is only the outer bound per test.
const BUN_TEST = [process.execPath, "test", "--timeout", "120000"];

// Any bun test flag: the plain `bun test` it was before, with those arguments.
if (argv.some((a) => a.startsWith("-"))) {
  process.exit(await Bun.spawn([...BUN_TEST, ...argv], { stdio: ["inherit", "inherit", "inherit"], env }).exited);
}

const allFiles = [...new Bun.Glob("tests/**/*.test.ts").scanSync({ cwd: ROOT })].map((p) => p.replaceAll("\\", "/")).sort();
/** Like bun test's own arguments: a file, a folder, or a part of a path. */
function chosen(args: string[]): string[] {
  if (args.length === 0) return allFiles;
  const picked = new Set<string>();
  for (const arg of args) {
    const asPath = relative(ROOT, join(process.cwd(), arg)).replaceAll("\\", "/");
    const isDir = existsSync(arg) && statSync(arg).isDirectory();
    const matches = allFiles.filter((f) => (isDir ? f.startsWith(`${asPath.replace(/\/$/, "")}/`) : f === asPath || f.includes(arg)));
    if (matches.length === 0) {
      console.error(`no test file matches ${JSON.stringify(arg)}`);
      process.exit(1);
    }
    for (const f of matches) picked.add(f);
  }
  return [...picked];
}

function readDurations(path: string): Record<string, number> {
  try {
    const parsed: unknown = JSON.parse(readFileSync(path, "utf8"));
    if (typeof parsed !== "object" || parsed === null) return {};
    return Object.fromEntries(Object.entries(parsed).filter((e): e is [string, number] => typeof e[1] === "number" && e[1] >= 0));
  } catch {
    return {};
  }
}
const durations = { ...readDurations(COMMITTED_DURATIONS), ...readDurations(CACHED_DURATIONS) };

const files: TestFile[] = chosen(argv).map((path) => ({ path, source: readFileSync(join(ROOT, path), "utf8") }));
const line = process.env.MESH_TEST_TRANSPORT || undefined;
const queue = planJobs(files, durations, { matrix: argv.length === 0, line });
const logs = mkdtempSync(join(tmpdir(), "mesh-test-run-"));
console.error(`${queue.length} test files, ${slots} at a time; each file's output in ${logs} until it passes`);

const running = new Map<TestJob, Bun.Subprocess>();
const results: FileResult[] = [];

async function runJob(job: TestJob, n: number): Promise<FileResult> {
  const logPath = join(logs, `${String(n).padStart(3, "0")}-${durationKey(job).replace(/[^\w.-]+/g, "_")}.log`);
  const childLogs = logPath.replace(/\.log$/, ".children");
  mkdirSync(childLogs);
  const fd = openSync(logPath, "w");
  const started = performance.now();
  const jobEnv = { ...env, MESH_TEST_CHILD_LOGS: childLogs, ...(job.line ? { MESH_TEST_TRANSPORT: job.line } : {}) };
  const proc = Bun.spawn([...BUN_TEST, job.file], { cwd: ROOT, stdio: ["ignore", fd, fd], env: jobEnv });
  closeSync(fd);
  running.set(job, proc);
  let killed: string | undefined;
  const limit = setTimeout(() => {
    killed = `stopped after ${FILE_LIMIT_S} s`;
    proc.kill("SIGKILL");
  }, FILE_LIMIT_S * 1000);
  const exitCode = await proc.exited;
  clearTimeout(limit);
  running.delete(job);
  const output = readFileSync(logPath, "utf8");
  const result: FileResult = { job, seconds: (performance.now() - started) / 1000, exitCode, counts: parseCounts(output), killed };
  if (fileFailed(result)) console.log(`\n${"─".repeat(20)} ${durationKey(job)}\n${output.trimEnd()}\n${childTails(childLogs)}${"─".repeat(20)}`);
  else {
    rmSync(logPath, { force: true });
    rmSync(childLogs, { recursive: true, force: true });
  }
  console.log(fileLine(result));
  return result;
}

/** The last lines each child of a failed file wrote (nodes, servers): what it did is often only there. */
function childTails(dir: string): string {
  return readdirSync(dir)
    .sort()
    .map((name) => `· ${name}, last ${CHILD_TAIL_LINES} lines:\n${lastLines(readFileSync(join(dir, name), "utf8"), CHILD_TAIL_LINES)}\n`)
    .join("");
}

const stopAll = (signal: NodeJS.Signals) => {
  for (const proc of running.values()) proc.kill("SIGKILL");
  process.exit(signal === "SIGINT" ? 130 : 143);
};
process.on("SIGINT", () => stopAll("SIGINT"));
process.on("SIGTERM", () => stopAll("SIGTERM"));

const wallStarted = performance.now();
await new Promise<void>((done) => {
  let started = 0;
  let aloneRunning = false;
  const fill = () => {
    if (queue.length === 0 && running.size === 0) return done();
    for (;;) {
      const i = nextJob(queue, running.size, slots, aloneRunning);
      if (i < 0) return;
      const [job] = queue.splice(i, 1);
      if (job!.alone) aloneRunning = true;
      void runJob(job!, ++started).then((r) => results.push(r)).finally(() => {
        if (job!.alone) aloneRunning = false;
        fill();
      });
    }
  };
  fill();
});
// The failed files that start real processes, once more each with the machine to themselves: a
// failure that holds then is a failure; one that does not is listed as flaky.
let n = results.length;
for (const [i, first] of results.entries()) {
  if (!fileFailed(first) || !runAgain(first.job)) continue;
  console.log(`\n${durationKey(first.job)} failed beside the others; running it again alone`);
  results[i] = { ...(await runJob(first.job, ++n)), first };
}
const wallS = (performance.now() - wallStarted) / 1000;

const measured = Object.fromEntries(results.map((r) => [durationKey(r.job), Math.round((r.first ?? r).seconds * 10) / 10]));
mkdirSync(join(CACHED_DURATIONS, ".."), { recursive: true });
writeFileSync(CACHED_DURATIONS, `${JSON.stringify({ ...readDurations(CACHED_DURATIONS), ...measured }, null, 2)}\n`);
if (saveDurations) {
  const sorted = Object.fromEntries(Object.entries({ ...readDurations(COMMITTED_DURATIONS), ...measured }).sort(([a], [b]) => a.localeCompare(b)));
  writeFileSync(COMMITTED_DURATIONS, `${JSON.stringify(sorted, null, 2)}\n`);
}
console.log(summary(results, wallS, slots));
const failed = results.some(fileFailed);
if (!failed) rmSync(logs, { recursive: true, force: true });
process.exit(failed ? 1 : 0);
