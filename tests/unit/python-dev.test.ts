/** Where the Python client tests' venv lives: a cache dir named by the pins, so new pins never reuse an old venv. */
import { expect, test } from "bun:test";
import { homedir } from "node:os";
import { join } from "node:path";
import { pythonCacheRoot, venvName } from "../../scripts/python-dev.ts";

const PINS = ["openai==3.22.1\nanthropic==1.13.0\n", "langchain-openai==1.6.6\n"];

test.each([
  ["the same pins", PINS, true],
  ["a pin changed", ["openai==3.22.2\nanthropic==1.13.0\n", PINS[1]!], false],
  ["a file's pin changed", [PINS[0]!, "langchain-openai==1.6.7\n"], false],
  ["a line moved from one file to the other", ["openai==3.22.1\n", "anthropic==1.13.0\nlangchain-openai==1.6.6\n"], false],
  ["the second file empty", [PINS[0]!, ""], false],
])("%s: same venv %p", (_, pins, same) => {
  expect(venvName(pins) === venvName(PINS)).toBe(same);
});

test("the name is 16 hex digits", () => {
  expect(venvName(PINS)).toMatch(/^[0-9a-f]{16}$/);
});

test.each([
  ["XDG_CACHE_HOME set", { XDG_CACHE_HOME: "/var/cache/u" }, "/var/cache/u/mesh/python-clients"],
  ["XDG_CACHE_HOME empty", { XDG_CACHE_HOME: "" }, join(homedir(), ".cache", "mesh", "python-clients")],
  ["XDG_CACHE_HOME unset", {}, join(homedir(), ".cache", "mesh", "python-clients")],
])("the cache root with %s", (_, env, root) => {
  expect(pythonCacheRoot(env)).toBe(root);
});
