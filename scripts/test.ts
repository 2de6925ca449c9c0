#!/usr/bin/env bun
/**
 * `npm test`: makes sure the real llama.cpp is there (building it into the cache on the first run,
 * about 5 minutes on 2 cores) and Chromium for the browser tests (Debian's, installed when it can
 * be), then runs `bun test` with MESH_LLAMA_DIR and MESH_CHROMIUM pointing at them, and then the
 * mesh suites a second time on the iroh 0.35 line (`--transport iroh035`: meshes founded on it
 * still run), the compatibility matrix. Arguments pass through to
 * `bun test` (e.g. `npm test -- tests/unit`), and then it runs once, on MESH_TEST_TRANSPORT's line.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { provideChromium } from "./chromium-dev.ts";
import { provideDevLlama } from "./llama-dev.ts";

const llama = await provideDevLlama();
console.error(`llama.cpp binaries: ${llama.dir}`);
const chromium = await provideChromium();
console.error("path" in chromium ? `chromium: ${chromium.path}` : `chromium: none (${chromium.missing}); the browser tests skip`);
// End-to-end tests start real processes on a loaded 2-core machine; each waits on conditions with
// its own deadlines, and this is only the outer bound per test.
const env = { ...process.env, MESH_LLAMA_DIR: llama.dir, ...("path" in chromium ? { MESH_CHROMIUM: chromium.path } : {}) };
const bunTest = async (args: string[], extra: Record<string, string> = {}) =>
  Bun.spawn([process.execPath, "test", "--timeout", "120000", ...args], { stdio: ["inherit", "inherit", "inherit"], env: { ...env, ...extra } }).exited;

const args = process.argv.slice(2);
const first = await bunTest(args);
// A whole run runs the mesh suites again on the other iroh line: every lab file, and every e2e and
// browser file that forms a mesh or dials a node as a peer. A run of chosen files runs once, on
// MESH_TEST_TRANSPORT's line.
if (args.length > 0 || process.env.MESH_TEST_TRANSPORT) process.exit(first);
const suites = (dir: string, all: boolean) =>
  readdirSync(join(import.meta.dir, "..", "tests", dir))
    .filter((f) => f.endsWith(".test.ts") && (all || /--join|RoguePeer/.test(readFileSync(join(import.meta.dir, "..", "tests", dir, f), "utf8"))))
    .map((f) => join("tests", dir, f));
const meshSuites = [...suites("e2e", false), ...suites("lab", true), ...suites("browser", false)];
console.error(`\nthe mesh suites again on --transport iroh035: ${meshSuites.length} files`);
const second = await bunTest(meshSuites, { MESH_TEST_TRANSPORT: "iroh035" });
process.exit(first || second);
