#!/usr/bin/env bun
/**
 * `npm test`: makes sure the real llama.cpp is there (building it into the cache on the first run,
 * about 5 minutes on 2 cores), then runs `bun test` with MESH_LLAMA_DIR pointing at it. Arguments
 * pass through to `bun test` (e.g. `npm test -- tests/unit`).
 */
import { provideDevLlama } from "./llama-dev.ts";

const llama = await provideDevLlama();
console.error(`llama.cpp binaries: ${llama.dir}`);
// End-to-end tests start real processes on a loaded 2-core machine; each waits on conditions with
// its own deadlines, and this is only the outer bound per test.
const proc = Bun.spawn([process.execPath, "test", "--timeout", "120000", ...process.argv.slice(2)], {
  stdio: ["inherit", "inherit", "inherit"],
  env: { ...process.env, MESH_LLAMA_DIR: llama.dir },
});
process.exit(await proc.exited);
