import { describe, expect, test } from "bun:test";
import { parseDuration, parseHostPort, parseMaxQueue, parseModelLimit, parsePort, parseSize } from "../../config/values.ts";

type Case<T> = [input: string, expected: T | Error];

function table<T>(name: string, parse: (s: string) => T, cases: Case<T>[]) {
  describe(name, () => {
    test.each(cases)("%p", (input, expected) => {
      if (expected instanceof Error) expect(() => parse(input)).toThrow(expected.message);
      else expect(parse(input)).toEqual(expected);
    });
  });
}

const bad = (m: string) => new Error(m);

table("parsePort", parsePort, [
  ["9337", 9337],
  ["0", 0],
  ["65535", 65535],
  ["65536", bad("expected a port number 0-65535")],
  ["abc", bad('got "abc"')],
  ["-1", bad("expected a port number")],
  ["80.5", bad("expected a port number")],
  ["", bad("expected a port number")],
]);

table("parseModelLimit", parseModelLimit, [
  ["1", 1],
  ["4", 4],
  ["-1", -1],
  ["0", bad("or -1 for no limit")],
  ["-2", bad("or -1 for no limit")],
  ["two", bad("or -1 for no limit")],
]);

table("parseMaxQueue", parseMaxQueue, [
  ["64", 64],
  ["0", 0],
  ["100000", 100_000],
  ["100001", bad("from 0 to 100000")],
  ["-1", bad("from 0 to 100000")],
  ["2.5", bad("from 0 to 100000")],
  ["", bad("from 0 to 100000")],
]);

table("parseDuration", parseDuration, [
  ["0", 0],
  ["30m", 1_800_000],
  ["90s", 90_000],
  ["1h30m", 5_400_000],
  ["500ms", 500],
  ["1.5h", 5_400_000],
  ["2d", 172_800_000],
  ["45", 45_000],
  ["30 m", bad("expected a duration")],
  ["m30", bad("expected a duration")],
  ["soon", bad("expected a duration")],
  ["", bad("expected a duration")],
]);

table("parseSize", parseSize, [
  ["1024", 1024],
  ["24GB", 24e9],
  ["24G", 24e9],
  ["16GiB", 16 * 2 ** 30],
  ["512mib", 512 * 2 ** 20],
  ["1.5T", 1.5e12],
  ["8 GB", 8e9],
  ["lots", bad("expected a size")],
  ["12XB", bad("expected a size")],
  ["-1GB", bad("expected a size")],
]);

table("parseHostPort", parseHostPort, [
  ["127.0.0.1:0", { host: "127.0.0.1", port: 0 }],
  ["0.0.0.0:4433", { host: "0.0.0.0", port: 4433 }],
  ["[::1]:0", { host: "::1", port: 0 }],
  ["localhost:9000", { host: "localhost", port: 9000 }],
  ["127.0.0.1", bad("expected HOST:PORT")],
  ["::1:0", bad("expected HOST:PORT")],
  ["127.0.0.1:99999", bad("expected a port number")],
]);
