/** `npm run build` makes one self-contained executable that runs from any directory. */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { killAllChildren, spawnChild } from "../../harness/children.ts";
import { startNode } from "../../harness/node.ts";

const REPO = join(import.meta.dir, "..", "..");
const outDir = mkdtempSync(join(tmpdir(), "mesh-binary-test-"));
const binary = join(outDir, "mesh");

beforeAll(async () => {
  const build = spawnChild("build", [process.execPath, join(REPO, "scripts/build.ts"), "--outfile", binary]);
  expect(await build.proc.exited).toBe(0);
}, 120_000);

afterAll(async () => {
  await killAllChildren();
  rmSync(outDir, { recursive: true, force: true });
});

test("the executable prints its version from another directory, iroh addon included", async () => {
  const child = spawnChild("mesh", [binary, "--version"], { cwd: tmpdir(), env: { NODE_PATH: "" } });
  expect(await child.proc.exited).toBe(0);
  const out = (await child.waitForOutput(/iroh .*\n/)).input!;
  expect(out).toMatch(/^mesh \d+\.\d+\.\d+\nllama\.cpp /);
  // Both lines' addons, the default one first.
  expect(out).toMatch(/iroh 1\.\d+\.\d+ \([^)]*the default line\); iroh 0\.35\.0 \([^)]*--transport iroh035\)/);
});

test("the executable starts a node that answers /health and stops on SIGTERM", async () => {
  const node = await startNode([], { command: [binary], cwd: tmpdir() });
  expect(await (await fetch(`${node.url}/health`)).json()).toEqual({ status: "ok" });
  expect(await node.stop()).toBe(0);
});

test("the executable serves the console it carries: the page, its script and its stylesheet, from another directory", async () => {
  const node = await startNode([], { command: [binary], cwd: tmpdir() });
  try {
    const page = await fetch(`${node.url}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toContain("text/html");
    const html = await page.text();
    expect(html).toContain('src="/console/app.js"');
    const js = await fetch(`${node.url}/console/app.js`);
    expect(js.headers.get("content-type")).toContain("javascript");
    // The bundle, not a placeholder: Preact and the page's own stream reading are in it.
    expect((await js.text()).length).toBeGreaterThan(10_000);
    const css = await fetch(`${node.url}/console/app.css`);
    expect(css.status).toBe(200);
    expect((await css.text()).length).toBeGreaterThan(100);
  } finally {
    await node.stop();
  }
});
