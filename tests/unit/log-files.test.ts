import { afterAll, expect, test } from "bun:test";
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeFileSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { capLogs } from "../../pool/log-files.ts";
import { formatJson } from "../../base/log.ts";

const dir = mkdtempSync(join(tmpdir(), "mesh-logs-test-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test("a log over the limit keeps its tail in .1 and goes on from empty; the writer's next line lands at the start", () => {
  const path = join(dir, "llama-server-m.log");
  const fd = openSync(path, "a");
  const line = (i: number) => `line ${String(i).padStart(6, "0")}\n`;
  for (let i = 0; i < 2000; i++) writeSync(fd, line(i));
  const small = join(dir, "rpc-server.log");
  writeFileSync(small, "short\n");
  expect(capLogs(dir, 10_000, 1_200)).toEqual(["llama-server-m.log"]);
  expect(statSync(path).size).toBe(0);
  const kept = readFileSync(`${path}.1`, "utf8");
  expect(kept.length).toBe(1_200);
  expect(kept.endsWith(line(1999))).toBe(true);
  writeSync(fd, "after the cut\n");
  closeSync(fd);
  expect(readFileSync(path, "utf8")).toBe("after the cut\n");
  expect(readFileSync(small, "utf8")).toBe("short\n");
  expect(capLogs(dir, 10_000, 1_200)).toEqual([]);
});

test("JSON log lines parse one by one, with time, level, message and fields", () => {
  const lines = [formatJson("info", "model ready", { model: "m", ms: 27 }), formatJson("error", 'a "quoted"\nmessage', { path: "/x" })];
  for (const l of lines) expect(l.includes("\n")).toBe(false);
  expect(lines.map((l) => JSON.parse(l))).toEqual([
    { time: expect.any(String), level: "info", msg: "model ready", model: "m", ms: 27 },
    { time: expect.any(String), level: "error", msg: 'a "quoted"\nmessage', path: "/x" },
  ]);
});
