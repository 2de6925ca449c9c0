/**
 * Which llama.cpp binaries the node runs: `--llama-dir`, else MESH_LLAMA_DIR, else a build in the
 * cache. Fails with a message that says what to do when none is there.
 */
import { join } from "node:path";
import { findLlamaBinaries, llamaCacheRoot, requireLlamaBinaries, type LlamaBinaries } from "./binaries.ts";
import { LLAMA_SOURCE_BUILD } from "./pin.ts";

export function resolveLlamaBinaries(llamaDir: string | undefined, env: Record<string, string | undefined> = process.env): LlamaBinaries {
  if (llamaDir) return requireLlamaBinaries(llamaDir, "--llama-dir");
  if (env.MESH_LLAMA_DIR) return requireLlamaBinaries(env.MESH_LLAMA_DIR, "MESH_LLAMA_DIR");
  const cached = join(llamaCacheRoot(env), `${LLAMA_SOURCE_BUILD}-cpu`);
  const found = findLlamaBinaries(cached);
  if (found) return found;
  throw new Error(
    `no llama.cpp binaries found (looked in ${cached}); pass --llama-dir DIR or set MESH_LLAMA_DIR ` +
      `to a directory with llama-server and rpc-server, or build them from a mesh checkout with \`npm run llama\``,
  );
}

/** The first line of `llama-server --version` that names the build. */
export async function llamaServerVersion(bin: LlamaBinaries): Promise<string> {
  const proc = Bun.spawn([bin.llamaServer, "--version"], { stdout: "pipe", stderr: "pipe" });
  const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  await proc.exited;
  const line = `${out}\n${err}`.split("\n").find((l) => l.startsWith("version:"));
  return line?.trim() ?? "version unknown";
}
