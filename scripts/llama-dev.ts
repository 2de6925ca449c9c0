#!/usr/bin/env bun
/**
 * Provides llama-server and the RPC server for development and CI without the internet: builds the
 * llama.cpp source that ships inside the npm package node-llama-cpp into a cache outside the work
 * tree, keyed by that version, and prints the directory. MESH_LLAMA_DIR, when set, wins.
 *
 *   bun scripts/llama-dev.ts          # prints the directory, building first if needed
 */
import { cpSync, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { findLlamaBinaries, llamaCacheRoot, requireLlamaBinaries, type LlamaBinaries } from "../llama/binaries.ts";
import { LLAMA_SOURCE, LLAMA_SOURCE_BUILD } from "../llama/pin.ts";
import { buildFromSource } from "../llama/source-build.ts";

async function sh(argv: string[], cwd: string): Promise<void> {
  const proc = Bun.spawn(argv, { cwd, stdout: "ignore", stderr: "pipe" });
  const err = await new Response(proc.stderr).text();
  if ((await proc.exited) !== 0) throw new Error(`${argv.join(" ")} failed:\n${err}`);
}

async function buildIntoCache(target: string): Promise<LlamaBinaries> {
  const root = llamaCacheRoot();
  mkdirSync(root, { recursive: true });
  const work = mkdtempSync(join(tmpdir(), "mesh-llama-build-"));
  const logFile = join(root, `${LLAMA_SOURCE_BUILD}-build.log`);
  rmSync(logFile, { force: true });
  try {
    const started = performance.now();
    console.error(`building llama.cpp from ${LLAMA_SOURCE.npmPackage}@${LLAMA_SOURCE.npmVersion} (about 5 minutes on 2 cores; log: ${logFile})`);
    await sh(["npm", "pack", "--silent", `${LLAMA_SOURCE.npmPackage}@${LLAMA_SOURCE.npmVersion}`], work);
    const tarball = join(work, `${LLAMA_SOURCE.npmPackage}-${LLAMA_SOURCE.npmVersion}.tgz`);
    await sh(["tar", "xzf", tarball, LLAMA_SOURCE.bundlePath], work);
    await sh(["git", "clone", "--quiet", join(work, LLAMA_SOURCE.bundlePath), "src"], work);
    const jobs = Math.max(1, navigator.hardwareConcurrency);
    const binDir = await buildFromSource({ sourceDir: join(work, "src"), buildDir: join(work, "build"), flavor: "cpu", jobs, logFile });
    // Stage next to the target and rename, so a reader never sees half a cache entry.
    const staging = `${target}.staging-${process.pid}`;
    mkdirSync(staging, { recursive: true });
    for (const name of ["llama-server", "ggml-rpc-server"]) cpSync(join(binDir, name), join(staging, name));
    if (existsSync(target)) rmSync(staging, { recursive: true, force: true });
    else renameSync(staging, target);
    console.error(`built in ${((performance.now() - started) / 1000).toFixed(0)} s`);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  const found = findLlamaBinaries(target);
  if (!found) throw new Error(`build finished but ${target} holds no binaries`);
  return found;
}

export async function provideDevLlama(): Promise<LlamaBinaries> {
  const fromEnv = process.env.MESH_LLAMA_DIR;
  if (fromEnv) return requireLlamaBinaries(fromEnv, "MESH_LLAMA_DIR");
  const target = join(llamaCacheRoot(), `${LLAMA_SOURCE_BUILD}-cpu`);
  return findLlamaBinaries(target) ?? (await buildIntoCache(target));
}

if (import.meta.main) {
  try {
    console.log((await provideDevLlama()).dir);
  } catch (err) {
    console.error(`llama-dev: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  }
}
