/**
 * The console page as the node serves it: the shell (`index.html`), one script and one stylesheet.
 * From source they are bundled in memory on first use (Bun.build, a few hundred ms), so a change to
 * `console/src` needs no build step; the compiled binary carries the bundle `scripts/build.ts`
 * wrote to `console/dist` (embedded with `--asset`), read from Bun's embedded file system.
 */
import { join } from "node:path";

export interface ConsoleAssets {
  html: string;
  js: string;
  css: string;
}

const SOURCE_DIR = import.meta.dir;
export const DIST_DIR = "console/dist";
const ENTRY = join(SOURCE_DIR, "src", "main.tsx");

/** Bundles the page from its sources (minified, for browsers); throws with the bundler's messages. */
export async function bundleConsole(): Promise<ConsoleAssets> {
  const out = await Bun.build({ entrypoints: [ENTRY], target: "browser", minify: true, sourcemap: "none" });
  if (!out.success) throw new Error(`the console did not bundle:\n${out.logs.map(String).join("\n")}`);
  const text = async (kind: "entry-point" | "asset", ext: string) => {
    const file = out.outputs.find((o) => o.kind === kind && o.path.endsWith(ext));
    return file ? file.text() : "";
  };
  return { html: await Bun.file(join(SOURCE_DIR, "index.html")).text(), js: await text("entry-point", ".js"), css: await text("asset", ".css") };
}

/** Writes the bundle where the build embeds it from (`scripts/build.ts`). */
export async function writeConsoleDist(root: string): Promise<string> {
  const assets = await bundleConsole();
  const dir = join(root, DIST_DIR);
  await Promise.all([Bun.write(join(dir, "index.html"), assets.html), Bun.write(join(dir, "app.js"), assets.js), Bun.write(join(dir, "app.css"), assets.css)]);
  return dir;
}

/** Whether this runs as the compiled binary (its code lives in Bun's embedded file system). */
const compiled = import.meta.dir.startsWith("/$bunfs/");

/**
 * The bundle `--asset console/dist` embedded. Bun names embedded assets by their path under the
 * asset folder's parent (`dist/app.js` in Bun 1.4), so they are found by that tail, not by a
 * directory guessed here.
 */
async function embedded(): Promise<ConsoleAssets> {
  const files = Bun.embeddedFiles as readonly (Blob & { name?: string })[];
  const read = (name: string) => {
    const file = files.find((f) => f.name === `dist/${name}` || f.name?.endsWith(`/dist/${name}`));
    if (!file) throw new Error(`the console's ${name} is not in this executable (built without scripts/build.ts?)`);
    return file.text();
  };
  const [html, js, css] = await Promise.all([read("index.html"), read("app.js"), read("app.css")]);
  return { html, js, css };
}

let loading: Promise<ConsoleAssets> | undefined;

/** The page's files, read or bundled once per process. */
export function consoleAssets(): Promise<ConsoleAssets> {
  if (!loading) {
    loading = compiled ? embedded() : bundleConsole();
    // A failed bundle is tried again on the next request rather than remembered.
    loading.catch(() => (loading = undefined));
  }
  return loading;
}
