import { expect, test } from "bun:test";
import { createLog, formatJson, formatText } from "../../base/log.ts";

test.each([
  ["info", "started", {}, "started"],
  ["warn", "slow", { ms: 12 }, "WARN slow ms=12"],
  ["error", "failed", { path: "/a b", skip: undefined }, 'ERROR failed path="/a b"'],
] as const)("text %s %s", (level, msg, fields, expected) => {
  expect(formatText(level, msg, fields)).toBe(expected);
});

test("json lines carry time, level, message and fields", () => {
  const line = formatJson("info", "hello", { peer: "abc", n: 2 }, new Date(0));
  expect(JSON.parse(line)).toEqual({ time: "1970-01-01T00:00:00.000Z", level: "info", msg: "hello", peer: "abc", n: 2 });
});

test("a log writes one line per event in its format", () => {
  const lines: string[] = [];
  const log = createLog("json", (l) => lines.push(l));
  log.info("a");
  log.error("b", { code: 1 });
  expect(lines.map((l) => JSON.parse(l).msg)).toEqual(["a", "b"]);
});
