#!/usr/bin/env bun
/**
 * Provides the Python the client tests run (tests/python/clients.py, with the SDKs users point at a
 * node): a venv made from tests/python/requirements.txt and cached outside the work tree under a
 * hash of the pins, so a change to them makes a new venv and never leaves a stale one in use.
 * LangChain's pins (requirements-langchain.txt) go on top where they can: they need a package some
 * mirrors lack, and without them only the LangChain checks skip. python3 and its venv module come
 * from Debian when this runs as root on a machine with apt-get (CI, a fresh dev box); elsewhere the
 * Python client tests skip and say why. MESH_PYTHON, when set, wins.
 *
 *   bun scripts/python-dev.ts          # prints the venv's python, making the venv first if needed
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

const PINS_DIR = join(import.meta.dir, "..", "tests", "python");
export const REQUIREMENTS = join(PINS_DIR, "requirements.txt");
export const LANGCHAIN_REQUIREMENTS = join(PINS_DIR, "requirements-langchain.txt");
/** Written last into a venv that is whole: a venv without it was cut short and is made again. */
const READY = "mesh-ready";

/** Root of the venv cache: `$XDG_CACHE_HOME/mesh/python-clients`, else `~/.cache/mesh/python-clients`. */
export function pythonCacheRoot(env: Record<string, string | undefined> = process.env): string {
  return join(env.XDG_CACHE_HOME || join(homedir(), ".cache"), "mesh", "python-clients");
}

/** The venv's name: a hash of every pin file, so editing one gives a venv of its own (pure). */
export function venvName(pinFiles: readonly string[]): string {
  const hash = createHash("sha256");
  for (const text of pinFiles) hash.update(text).update("\0");
  return hash.digest("hex").slice(0, 16);
}

async function run(argv: string[]): Promise<boolean> {
  // stdout to stderr: this script's own stdout is the python's path and nothing else.
  const proc = Bun.spawn(argv, { stdio: ["ignore", 2, 2], env: { ...process.env, DEBIAN_FRONTEND: "noninteractive", PIP_DISABLE_PIP_VERSION_CHECK: "1" } });
  return (await proc.exited) === 0;
}

const canMakeVenvs = (python: string) => run([python, "-c", "import venv, ensurepip"]);

/** A python3 that can make venvs (Debian keeps `venv` and `ensurepip` in python3-venv), or why there is none. */
async function basePython(): Promise<{ path: string } | { missing: string }> {
  const found = Bun.which("python3");
  if (found && (await canMakeVenvs(found))) return { path: found };
  const need = "python3 with its venv module (Debian: apt-get install python3 python3-venv python3-pip)";
  if (process.getuid?.() !== 0 || !Bun.which("apt-get")) return { missing: `no ${need}` };
  console.error("installing Debian's python3-venv for the Python client tests (apt-get)...");
  const installed = (await run(["apt-get", "update", "-qq"])) && (await run(["apt-get", "install", "-y", "-qq", "python3", "python3-venv", "python3-pip"]));
  const python = Bun.which("python3");
  if (installed && python && (await canMakeVenvs(python))) return { path: python };
  return { missing: `apt-get could not install ${need}` };
}

async function makeVenv(base: string, dir: string): Promise<{ path: string } | { missing: string }> {
  // Made beside its place and renamed into it, so a run cut short never leaves a half venv there.
  const partial = `${dir}.partial-${process.pid}`;
  rmSync(partial, { recursive: true, force: true });
  const python = join(partial, "bin", "python");
  const pip = (...files: string[]) => run([python, "-m", "pip", "install", "--quiet", ...files.flatMap((f) => ["-r", f])]);
  console.error(`making the Python venv for the client tests in ${dir} (pip)...`);
  if (!(await run([base, "-m", "venv", partial])) || !(await pip(REQUIREMENTS))) {
    rmSync(partial, { recursive: true, force: true });
    return { missing: `pip could not install ${REQUIREMENTS} (its output is above)` };
  }
  // Both files in one resolve, so LangChain's needs never move a pin of the first.
  if (!(await pip(REQUIREMENTS, LANGCHAIN_REQUIREMENTS))) {
    console.error(`LangChain could not be installed (pip's output is above): the LangChain checks skip; remove ${dir} to try again`);
  }
  writeFileSync(join(partial, READY), "");
  try {
    renameSync(partial, dir);
  } catch {
    // Another run made it first: use that one.
    rmSync(partial, { recursive: true, force: true });
    if (!existsSync(join(dir, READY))) return { missing: `${dir} is in the way and incomplete; remove it` };
  }
  return { path: join(dir, "bin", "python") };
}

/** The python with the client SDKs, or why there is none. */
export async function providePython(): Promise<{ path: string } | { missing: string }> {
  const fromEnv = process.env.MESH_PYTHON;
  if (fromEnv) return existsSync(fromEnv) ? { path: fromEnv } : { missing: `MESH_PYTHON=${fromEnv} does not exist` };
  const dir = join(pythonCacheRoot(), venvName([REQUIREMENTS, LANGCHAIN_REQUIREMENTS].map((f) => readFileSync(f, "utf8"))));
  if (existsSync(join(dir, READY))) return { path: join(dir, "bin", "python") };
  rmSync(dir, { recursive: true, force: true });
  const base = await basePython();
  return "missing" in base ? base : await makeVenv(base.path, dir);
}

if (import.meta.main) {
  const python = await providePython();
  if ("missing" in python) {
    console.error(`python-dev: ${python.missing}`);
    process.exit(1);
  }
  console.log(python.path);
}
