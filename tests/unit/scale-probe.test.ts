import { describe, expect, test } from "bun:test";
import { partsBetween, threadPart, threadTimes, type ThreadTimes } from "../../bench/scale-probe.ts";

describe("bench/scale.ts: a node's threads, by part", () => {
  test.each([
    [100, 100, "mesh", "loop"],
    [100, 100, "tokio-rt-worker", "loop"],
    [101, 100, "tokio-rt-worker", "iroh"],
    [102, 100, "tokio-runtime-w", "iroh"],
    [103, 100, "JITWorker", "rest"],
    [104, 100, "mi-scavenger", "rest"],
    [105, 100, "HeapHelper", "rest"],
  ] as const)("thread %i of %i named %s is the %s", (tid, pid, name, part) => {
    expect(threadPart(tid, pid, name)).toBe(part);
  });

  const t = (part: ThreadTimes["part"], cpu: number, wakes: number): ThreadTimes => ({ part, cpu, wakes });
  const before = new Map([
    [1, t("loop", 10, 100)],
    [2, t("iroh", 5, 1_000)],
    [3, t("rest", 7, 50)],
    [4, t("rest", 3, 10)],
  ]);
  // Thread 4 ended (a JIT worker that went idle), thread 5 was born.
  const after = new Map([
    [1, t("loop", 11, 120)],
    [2, t("iroh", 7, 1_400)],
    [3, t("rest", 7.5, 60)],
    [5, t("rest", 0.25, 5)],
  ]);

  test("the parts between two looks: threads that lived through count their difference, those born count from zero", () => {
    expect(partsBetween(before, after)).toEqual({ loop: t("loop", 1, 20), iroh: t("iroh", 2, 400), rest: t("rest", 0.75, 15) });
  });

  test("given the process's own CPU, the rest's CPU is what the loop and iroh did not use (an ended thread's time included)", () => {
    expect(partsBetween(before, after, 4.5).rest.cpu).toBe(1.5);
    expect(partsBetween(before, after, 2).rest.cpu).toBe(0);
  });

  test.skipIf(process.platform !== "linux")("this process's own threads: the event loop is found and its CPU counted", () => {
    const loop = [...threadTimes(process.pid).values()].filter((x) => x.part === "loop");
    expect(loop.length).toBe(1);
    expect(loop[0]!.cpu).toBeGreaterThan(0);
  });

  test("a process that is gone has no threads", () => {
    expect(threadTimes(2 ** 22 + 7).size).toBe(0);
  });
});
