/**
 * Where the llama.cpp executables are: a directory counts when it holds `llama-server` and an RPC
 * server, which newer trees call `ggml-rpc-server` and older trees and many archives `rpc-server`.
 */
import { existsSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

export interface LlamaBinaries {
  dir: string;
  llamaServer: string;
  rpcServer: string;
  /** Which build it is (`<release>-<flavor>` from the cache's record, else `llama-server --version`), once known. */
  build?: string;
}

const RPC_SERVER_NAMES = ["rpc-server", "ggml-rpc-server"] as const;
/** Layouts seen in archives and build trees, relative to the directory a user names. */
const SUBDIRS = ["", "bin", "build/bin"] as const;

function isExecutableFile(path: string): boolean {
  try {
    const st = statSync(path);
    return st.isFile() && (st.mode & 0o111) !== 0;
  } catch {
    return false;
  }
}

/** The binaries inside `dir`, or null when it does not hold both. */
export function findLlamaBinaries(dir: string): LlamaBinaries | null {
  const exe = process.platform === "win32" ? ".exe" : "";
  for (const sub of SUBDIRS) {
    const base = join(dir, sub);
    const llamaServer = join(base, `llama-server${exe}`);
    if (!isExecutableFile(llamaServer)) continue;
    for (const name of RPC_SERVER_NAMES) {
      const rpcServer = join(base, `${name}${exe}`);
      if (isExecutableFile(rpcServer)) return { dir: base, llamaServer, rpcServer };
    }
  }
  return null;
}

/** Root of the binary cache: `$XDG_CACHE_HOME/mesh/llama.cpp`, else `~/.cache/mesh/llama.cpp`. */
export function llamaCacheRoot(env: Record<string, string | undefined> = process.env): string {
  const base = env.XDG_CACHE_HOME || join(homedir(), ".cache");
  return join(base, "mesh", "llama.cpp");
}

/** Resolves an explicit directory (flag, else MESH_LLAMA_DIR), failing with what to do next. */
export function requireLlamaBinaries(dir: string, origin: string): LlamaBinaries {
  if (!existsSync(dir)) throw new Error(`${origin} ${dir} does not exist`);
  const found = findLlamaBinaries(dir);
  if (!found) {
    throw new Error(
      `${origin} ${dir} holds no llama-server with rpc-server (or ggml-rpc-server) beside it; ` +
        `point it at the directory that contains both`,
    );
  }
  return found;
}

/** `llama-server --version`: its exit code and what it printed (the build line goes to stderr). */
export async function runVersion(bin: LlamaBinaries): Promise<{ code: number; text: string }> {
  const proc = Bun.spawn([bin.llamaServer, "--version"], { stdout: "pipe", stderr: "pipe" });
  const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  return { code: await proc.exited, text: `${out}\n${err}` };
}
