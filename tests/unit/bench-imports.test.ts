/**
 * Benches share helpers with tests through `harness/`, the room both import: no bench file imports
 * `tests/` (issue 29's layering), read from the files' own import statements.
 */
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";

const REPO = join(import.meta.dir, "..", "..");
const benches = [...new Bun.Glob("bench/**/*.ts").scanSync({ cwd: REPO })].sort();
/** Every module specifier a file imports or re-exports, static or dynamic. */
const importsOf = (text: string) => [...text.matchAll(/(?:from|import)\s*\(?\s*["']([^"']+)["']/g)].map((m) => m[1]!);

test("there are benches to check", () => expect(benches.length).toBeGreaterThan(10));

test.each(benches)("%s imports nothing from tests/", (file) => {
  const intoTests = importsOf(readFileSync(join(REPO, file), "utf8")).filter((spec) => /(^|\/)tests\//.test(spec));
  expect(intoTests).toEqual([]);
});
