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

/** The modules a file imports or re-exports, statically (`import ... from`, `export ... from`, `import "x"`) or lazily (`import("x")`). */
const allImportsOf = (text: string) => [...text.matchAll(/^\s*(?:import|export)\b[^;]*?(?:from\s*)?["']([^"']+)["']|\bimport\(\s*["']([^"']+)["']\s*\)/gm)].map((m) => (m[1] ?? m[2])!);

/**
 * Each file's imports of other files of the set (relative specifiers resolved), the lazy ones
 * too: a file that loads another lazily still depends on it, and a circle through a lazy
 * `import()` is a circle to a reader all the same (the iroh lines once imported the helpers of
 * the very file that loads them).
 */
const graph = new Map(files.map((f) => [f, allImportsOf(texts.get(f)!).filter((s) => s.startsWith(".")).map((s) => normalize(join(dirname(f), s))).filter((d) => texts.has(d))]));

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

/**
 * The floors of the house, bottom up, as the README's architecture section draws them: a file may
 * import its own floor and the ones below, never one above. `base/` holds the helpers every floor
 * uses (logging, private files, progress); at the root stands only `main.ts`, the roof. `router/` has rooms of
 * its own: HTTP plumbing, the serving core, the dialects, the console, and the app that joins them.
 */
const FLOORS = [
  "base",
  "streams",
  "placement",
  "models",
  "llama",
  "mesh",
  "tunnel",
  "pool",
  "kv",
  "config",
  "metrics",
  "node",
  "router/http",
  "router/serving",
  "router/dialects",
  "router/console",
  "router",
  "service",
  "commands",
  "app",
  "main",
  "scripts",
  "harness",
  "bench",
] as const;

/** The floor a file stands on (pure). */
function floorOf(file: string): string {
  const parts = file.split("/");
  // A helper left at the root stands on no floor: its place is base/.
  if (parts.length === 1) return file === "main.ts" ? "main" : "the root";
  if (parts[0] === "router" && parts.length > 2) return `router/${parts[1]}`;
  return parts[0]!;
}

/** Each import that points up a floor, as "file -> imported". */
function upwardImports(g: ReadonlyMap<string, readonly string[]>): string[] {
  const rank = (f: string) => FLOORS.indexOf(floorOf(f) as (typeof FLOORS)[number]);
  return [...g].flatMap(([file, imported]) => imported.filter((d) => rank(d) > rank(file)).map((d) => `${file} -> ${d}`));
}

test.each([
  ["base/log.ts", "base"],
  ["main.ts", "main"],
  ["mesh/membership.ts", "mesh"],
  ["router/app.ts", "router"],
  ["router/http/errors.ts", "router/http"],
  ["models/stores/ollama.ts", "models"],
])("%s stands on %s", (file, floor) => expect(floorOf(file)).toBe(floor));

test("every file stands on a floor the house has", () => {
  expect(files.filter((f) => !FLOORS.includes(floorOf(f) as (typeof FLOORS)[number]))).toEqual([]);
});

test("the finder finds an import up a floor", () => {
  expect(upwardImports(new Map([["mesh/a.ts", ["config/b.ts", "streams/c.ts"]], ["config/b.ts", ["mesh/a.ts"]]]))).toEqual(["mesh/a.ts -> config/b.ts"]);
});

test("no import points up a floor", () => expect(upwardImports(graph)).toEqual([]));

test("the README's architecture table draws these floors, in this order", () => {
  const readme = readFileSync(join(REPO, "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("## Architecture"), readme.indexOf("## Development"));
  const drawn = [...section.matchAll(/^\| `([a-z.]+)\/?` \|/gm)].map((m) => m[1]!.replace(/\.ts$/, "")).reverse();
  const product = FLOORS.slice(FLOORS.indexOf("base"), FLOORS.indexOf("main") + 1).filter((f) => !f.startsWith("router/"));
  expect(drawn).toEqual(product);
});

/** Issue 45: a product file that outgrows this is doing more than one thing (the harness, benches and scripts are not held to it). */
const MAX_PRODUCT_LINES = 400;
test(`no product file is over ${MAX_PRODUCT_LINES} lines`, () => {
  const product = files.filter((f) => !["scripts", "harness", "bench"].includes(floorOf(f)));
  const long = product.map((f) => [f, texts.get(f)!.split("\n").length - 1] as const).filter(([, n]) => n > MAX_PRODUCT_LINES);
  expect(long).toEqual([]);
});
