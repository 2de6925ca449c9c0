/**
 * The import graph of the product, the benches and the harness, read from the files' own import
 * statements (issue 29's layering): no circle of files importing each other, and benches share
 * helpers with tests through `harness/`, the room both import, never `tests/`.
 */
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";

const REPO = join(import.meta.dir, "..", "..");
const OUTSIDE = ["node_modules/", "dist/", "tests/", "console/"];
const files = [...new Bun.Glob("**/*.ts").scanSync({ cwd: REPO })].filter((f) => !OUTSIDE.some((o) => f.startsWith(o))).sort();
const texts = new Map(files.map((f) => [f, readFileSync(join(REPO, f), "utf8")]));
/** Every module specifier a file imports or re-exports, static or dynamic. */
const importsOf = (text: string) => [...text.matchAll(/(?:from|import)\s*\(?\s*["']([^"']+)["']/g)].map((m) => m[1]!);

/** The modules a file imports or re-exports statically (`import ... from`, `export ... from`, `import "x"`). */
const staticImportsOf = (text: string) => [...text.matchAll(/^\s*(?:import|export)\b[^;]*?(?:from\s*)?["']([^"']+)["']/gm)].map((m) => m[1]!);

/**
 * Each file's static imports of other files of the set (relative specifiers resolved). A lazy
 * `import()` (an iroh line's binding, loaded only when that line starts) runs after every module
 * is initialised, so it closes no circle of initialisation; it is left out.
 */
const graph = new Map(files.map((f) => [f, staticImportsOf(texts.get(f)!).filter((s) => s.startsWith(".")).map((s) => normalize(join(dirname(f), s))).filter((d) => texts.has(d))]));

/** The circles of files importing each other (strongly connected components of more than one file; Tarjan). */
function circles(g: ReadonlyMap<string, readonly string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of g.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1) found.push(component.sort());
  };
  for (const v of g.keys()) if (!index.has(v)) visit(v);
  return found;
}

test("the finder finds a circle where there is one", () => {
  expect(circles(new Map([["a", ["b"]], ["b", ["c"]], ["c", ["a"]], ["d", ["a"]]]))).toEqual([["a", "b", "c"]]);
  expect(circles(new Map([["a", ["b"]], ["b", []]]))).toEqual([]);
});

test("there are files to check", () => expect(files.length).toBeGreaterThan(200));

test("no circle of files importing each other", () => expect(circles(graph)).toEqual([]));

test.each(files.filter((f) => f.startsWith("bench/")))("%s imports nothing from tests/", (file) => {
  expect(importsOf(texts.get(file)!).filter((spec) => /(^|\/)tests\//.test(spec))).toEqual([]);
});
