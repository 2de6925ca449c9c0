import { describe, expect, test } from "bun:test";
import { threadPart, threadParts } from "../../bench/scale-probe.ts";

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

  test.skipIf(process.platform !== "linux")("this process's own threads: the event loop's CPU and wake-ups are counted", () => {
    const parts = threadParts(process.pid);
    expect(parts.get("loop")!.cpu).toBeGreaterThan(0);
    expect(parts.get("loop")!.wakes).toBeGreaterThanOrEqual(0);
  });

  test("a process that is gone has no parts", () => {
    expect(threadParts(2 ** 22 + 7).size).toBe(0);
  });
});
