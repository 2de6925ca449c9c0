#!/usr/bin/env bun
/**
 * `npm test`: makes sure the real llama.cpp is there (building it into the cache on the first run,
 * about 5 minutes on 2 cores) and Chromium for the browser tests (Debian's, installed when it can
 * be), then runs `bun test` with MESH_LLAMA_DIR and MESH_CHROMIUM pointing at them. Arguments pass
 * through to `bun test` (e.g. `npm test -- tests/unit`).
 */
import { provideChromium } from "./chromium-dev.ts";
import { provideDevLlama } from "./llama-dev.ts";

const llama = await provideDevLlama();
console.error(`llama.cpp binaries: ${llama.dir}`);
const chromium = await provideChromium();
console.error("path" in chromium ? `chromium: ${chromium.path}` : `chromium: none (${chromium.missing}); the browser tests skip`);
// End-to-end tests start real processes on a loaded 2-core machine; each waits on conditions with
// its own deadlines, and this is only the outer bound per test.
const proc = Bun.spawn([process.execPath, "test", "--timeout", "120000", ...process.argv.slice(2)], {
  stdio: ["inherit", "inherit", "inherit"],
  env: { ...process.env, MESH_LLAMA_DIR: llama.dir, ...("path" in chromium ? { MESH_CHROMIUM: chromium.path } : {}) },
});
process.exit(await proc.exited);
