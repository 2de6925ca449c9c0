import { describe, expect, test } from "bun:test";
import { durationKey, guessS, isMeshSuite, MATRIX_LINE, nextJob, planJobs, runAgain, type TestJob } from "../../scripts/test-runner/plan.ts";
import { failedTests, fileFailed, fileLine, lastLines, parseCounts, summary, type FileResult } from "../../scripts/test-runner/report.ts";

const file = (path: string, source = "") => ({ path, source });
const job = (f: string, o: Partial<TestJob> = {}): TestJob => ({ file: f, estimateS: 1, alone: false, ...o });

describe("isMeshSuite: the files the 0.35 matrix runs again", () => {
  test.each([
    ["tests/lab/anything.test.ts", "", true],
    ["tests/e2e/mesh.test.ts", `startNode(["--join", token])`, true],
    ["tests/e2e/attack-rpc.test.ts", "new RoguePeer()", true],
    ["tests/browser/console.test.ts", `"--join"`, true],
    ["tests/e2e/ollama-client.test.ts", "await hostAndEntry(MODEL, hostArgs, entryArgs, nodes)", true],
    ["tests/e2e/cli.test.ts", "no mesh here", false],
    ["tests/browser/console-auth.test.ts", "", false],
    ["tests/unit/mesh.test.ts", "--join", false],
    ["tests/fuzz/join-token.test.ts", "RoguePeer", false],
  ])("%s", (path, source, expected) => expect(isMeshSuite(file(path, source))).toBe(expected));
});

describe("planJobs", () => {
  const files = [file("tests/unit/a.test.ts"), file("tests/e2e/b.test.ts", "--join"), file("tests/lab/c.test.ts"), file("tests/e2e/d.test.ts")];

  test("a whole run: every file once, the mesh suites again on 0.35, longest first", () => {
    const jobs = planJobs(files, { "tests/e2e/b.test.ts": 50, "iroh035:tests/e2e/b.test.ts": 70, "tests/lab/c.test.ts": 100, "tests/e2e/d.test.ts": 10 }, { matrix: true });
    expect(jobs.map((j) => [durationKey(j), j.estimateS])).toEqual([
      ["iroh035:tests/lab/c.test.ts", 100],
      ["tests/lab/c.test.ts", 100],
      ["iroh035:tests/e2e/b.test.ts", 70],
      ["tests/e2e/b.test.ts", 50],
      ["tests/e2e/d.test.ts", 10],
      ["tests/unit/a.test.ts", guessS("tests/unit/a.test.ts")],
    ]);
  });

  test("chosen files run once, on MESH_TEST_TRANSPORT's line when it is set", () => {
    expect(planJobs(files.slice(0, 2), {}, { matrix: false }).map(durationKey)).toEqual(["tests/e2e/b.test.ts", "tests/unit/a.test.ts"]);
    expect(planJobs(files.slice(0, 2), {}, { matrix: true, line: MATRIX_LINE }).map(durationKey)).toEqual([`${MATRIX_LINE}:tests/e2e/b.test.ts`, `${MATRIX_LINE}:tests/unit/a.test.ts`]);
  });

  test("a file never measured is guessed by its folder; a file that runs alone goes last", () => {
    expect([guessS("tests/lab/x.test.ts"), guessS("tests/e2e/x.test.ts"), guessS("tests/browser/x.test.ts"), guessS("tests/unit/x.test.ts")]).toEqual([180, 60, 60, 2]);
    const alone = file("tests/e2e/cpu.test.ts", "// test-runner: alone, it measures CPU time\n");
    const jobs = planJobs([alone, ...files], { "tests/e2e/cpu.test.ts": 500 }, { matrix: false });
    expect(jobs.at(-1)).toMatchObject({ file: "tests/e2e/cpu.test.ts", alone: true });
    expect(jobs.filter((j) => j.alone)).toHaveLength(1);
  });
});

describe("nextJob: who starts when", () => {
  const shared = [job("a"), job("b")];
  const alone = job("z", { alone: true });
  test.each([
    ["a free slot takes the first", shared, 0, 4, false, 0],
    ["no free slot", shared, 4, 4, false, -1],
    ["nothing queued", [], 0, 4, false, -1],
    ["an alone file is running", shared, 1, 4, true, -1],
    ["shared files go before an alone one", [alone, ...shared], 1, 4, false, 1],
    ["an alone one waits for the others to end", [alone], 2, 4, false, -1],
    ["an alone one starts on an idle machine", [alone], 0, 4, false, 0],
  ] as const)("%s", (_why, queue, running, slots, runningAlone, expected) => expect(nextJob(queue, running, slots, runningAlone)).toBe(expected));
});

describe("report", () => {
  const BUN_OUTPUT = "tests/e2e/x.test.ts:\n(pass) one\n(fail) two\n\n 12 pass\n 1 skip\n 2 fail\n 30 expect() calls\nRan 15 tests across 1 file. [3.00s]\n";
  const result = (o: Partial<FileResult>): FileResult => ({ job: job("tests/e2e/x.test.ts"), seconds: 3, exitCode: 0, counts: parseCounts(" 4 pass\n 0 fail\n"), ...o });

  test("parseCounts reads bun test's summary and ignores the rest", () => {
    expect(parseCounts(BUN_OUTPUT)).toEqual({ pass: 12, skip: 1, todo: 0, fail: 2, error: 0 });
    expect(parseCounts(" 0 pass\n 1 fail\n 1 error\n")).toEqual({ pass: 0, skip: 0, todo: 0, fail: 1, error: 1 });
    expect(parseCounts("said 3 pass in a log line\n")).toEqual({ pass: 0, skip: 0, todo: 0, fail: 0, error: 0 });
  });

  test.each([
    ["all passed", {}, false],
    ["a test failed", { counts: parseCounts(" 3 pass\n 1 fail\n"), exitCode: 1 }, true],
    ["exited non-zero with nothing failed (an error between tests)", { exitCode: 1 }, true],
    ["crashed before its summary", { counts: parseCounts(""), exitCode: 0 }, true],
    ["stopped by the runner", { killed: "stopped after 900 s" }, true],
    ["every test skipped (no Chromium)", { counts: parseCounts(" 0 pass\n 3 skip\n 0 fail\n") }, false],
  ] as const)("fileFailed: %s", (_why, o, expected) => expect(fileFailed(result(o))).toBe(expected));

  test("the summary names the slowest files and the failed ones, and ends with the totals CI reads", () => {
    const results = [
      result({ job: job("tests/unit/u.test.ts"), seconds: 1 }),
      result({ job: job("tests/e2e/slow.test.ts"), seconds: 90 }),
      result({ job: job("tests/e2e/broken.test.ts", { line: MATRIX_LINE }), seconds: 20, exitCode: 1, counts: parseCounts(" 2 pass\n 3 fail\n") }),
      result({ job: job("tests/e2e/died.test.ts"), seconds: 5, exitCode: 1, counts: parseCounts("") }),
    ];
    expect(failedTests(results)).toBe(4);
    const text = summary(results, 100, 4, 2);
    expect(text).toContain("the slowest 2 of 4 files:\n   90.0 s  tests/e2e/slow.test.ts\n   20.0 s  iroh035:tests/e2e/broken.test.ts\n");
    expect(text).toContain("2 failed:");
    expect(text).toContain(fileLine(results[3]!));
    expect(text).toContain("4 files in 100 s, 4 at a time (116 s of files, 1.2 running on average)");
    expect(text.split("\n").at(-1)).toBe("total: 10 pass, 0 skip, 0 todo, 4 fail");
  });

  test.each([
    ["tests/e2e/mesh.test.ts", true],
    ["tests/lab/partition.test.ts", true],
    ["tests/browser/console.test.ts", true],
    ["tests/unit/router.test.ts", false],
    ["tests/fuzz/gossip.test.ts", false],
  ] as const)("runAgain: %s when it failed, %p", (path, expected) => expect(runAgain(job(path, { line: MATRIX_LINE }))).toBe(expected));

  test("a file that passed run again alone is listed as flaky and not failed; one that failed again is failed", () => {
    const first = result({ job: job("tests/e2e/flaky.test.ts"), seconds: 60, exitCode: 1, counts: parseCounts(" 3 pass\n 1 fail\n") });
    const again = result({ job: first.job, seconds: 20, counts: parseCounts(" 4 pass\n 0 fail\n"), first });
    const firstHard = result({ job: job("tests/e2e/hard.test.ts"), seconds: 10, exitCode: 1, counts: parseCounts(" 0 pass\n 2 fail\n") });
    const againHard = result({ job: firstHard.job, seconds: 10, exitCode: 1, counts: parseCounts(" 0 pass\n 2 fail\n"), first: firstHard });
    expect(fileLine(again)).toContain("(4 pass, 0 skip, 0 fail, run again alone)");
    const text = summary([again, againHard], 100, 4);
    expect(text).toContain(`1 flaky (failed beside the others, passed run again alone; each a bug to fix, its first output above):\n${fileLine(first)}\n`);
    expect(text).toContain(`1 failed:\n${fileLine(againHard)}`);
    expect(text.split("\n").at(-1)).toBe("total: 4 pass, 0 skip, 0 todo, 2 fail");
  });

  test.each([
    ["fewer lines than asked: all of them", "a\nb\n", 5, "a\nb"],
    ["the last ones, trailing blank lines left out", "a\nb\nc\n\n", 2, "b\nc"],
    ["nothing written", "", 3, ""],
  ] as const)("lastLines: %s", (_why, text, n, expected) => expect(lastLines(text, n)).toBe(expected));
});
