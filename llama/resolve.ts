/**
 * Which llama.cpp binaries the node runs: `--llama-dir`, else MESH_LLAMA_DIR, else a build in the
 * cache for the pinned release and this machine's flavor (downloaded there on first run). When
 * none can be had, the error says what to do, and the node does not start half-way.
 */
import type { Log } from "../base/log.ts";
import { findLlamaBinaries, llamaCacheRoot, requireLlamaBinaries, runVersion, type LlamaBinaries } from "./binaries.ts";
import { buildFlavor, releaseFlavor, type MachineProbe } from "./flavor.ts";
import { cacheDirFor, INSTALL_RECORD, installRelease } from "./install.ts";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { probeMachine } from "./probe.ts";
import type { LlamaFlavor } from "./source-build.ts";

/** Which llama.cpp the node runs, as its settings say (`--llama-dir`, `--llama-release`, `--llama-flavor`, `--llama-mirror`). */
export interface LlamaChoice {
  llamaDir: string | undefined;
  llamaRelease: string;
  llamaFlavor: LlamaFlavor | undefined;
  llamaMirror: string;
}
type Env = Record<string, string | undefined>;

/** Flavors whose cached build would do, best first: one built here for this machine, then the release's. */
export function cacheCandidates(choice: Pick<LlamaChoice, "llamaFlavor">, probe: MachineProbe): LlamaFlavor[] {
  if (choice.llamaFlavor) return [choice.llamaFlavor];
  return [...new Set([buildFlavor(probe), releaseFlavor(probe)])];
}

/** The binaries named explicitly or already in the cache, without touching the network. */
export function findLlama(choice: LlamaChoice, env: Env = process.env, probe: MachineProbe = probeMachine()): LlamaBinaries | undefined {
  if (choice.llamaDir) return requireLlamaBinaries(choice.llamaDir, "--llama-dir");
  if (env.MESH_LLAMA_DIR) return requireLlamaBinaries(env.MESH_LLAMA_DIR, "MESH_LLAMA_DIR");
  const root = llamaCacheRoot(env);
  for (const flavor of cacheCandidates(choice, probe)) {
    const found = findLlamaBinaries(cacheDirFor(root, choice.llamaRelease, flavor));
    if (found) return found;
  }
  return undefined;
}

/** As `findLlama`, and downloads the release build into the cache when nothing is there. */
export async function provideLlama(choice: LlamaChoice, log: Log, env: Env = process.env): Promise<LlamaBinaries> {
  const probe = probeMachine();
  const found = findLlama(choice, env, probe);
  if (found) return found;
  const flavor = choice.llamaFlavor ?? releaseFlavor(probe);
  try {
    return await installRelease({ cacheRoot: llamaCacheRoot(env), tag: choice.llamaRelease, flavor, apiBase: choice.llamaMirror, log });
  } catch (err) {
    throw new Error(
      `could not get llama.cpp ${choice.llamaRelease} (${flavor}, ${process.platform}-${process.arch}): ${(err as Error).message}\n` +
        `Either point --llama-dir (or MESH_LLAMA_DIR) at a directory with llama-server and rpc-server, ` +
        `or build them here with \`mesh llama build\` (add --source PATH for a llama.cpp tree, tarball or git bundle when offline).`,
    );
  }
}

/** Names the build: the cache's record of it, else what `llama-server --version` says. */
export async function describeBuild(bin: LlamaBinaries): Promise<string> {
  try {
    const record = JSON.parse(readFileSync(join(bin.dir, INSTALL_RECORD), "utf8")) as { tag?: unknown; flavor?: unknown };
    if (typeof record.tag === "string" && typeof record.flavor === "string") return `${record.tag}-${record.flavor}`;
  } catch {
    // not installed by mesh (--llama-dir, MESH_LLAMA_DIR)
  }
  return (await llamaServerVersion(bin)).replace(/^version:\s*/, "");
}

/** The first line of `llama-server --version` that names the build. */
export async function llamaServerVersion(bin: LlamaBinaries): Promise<string> {
  const line = (await runVersion(bin)).text.split("\n").find((l) => l.startsWith("version:"));
  return line?.trim() ?? "version unknown";
}
