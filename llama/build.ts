/**
 * `mesh llama build`: builds llama-server and the RPC server from a llama.cpp source (a tree, a
 * tarball, a git bundle, the node-llama-cpp npm package that carries one, or a URL of any of
 * these; by default the pinned release's source from the releases API) for a flavor, into the
 * same cache a download goes to, under the same lock. The dev/CI script builds through here.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import type { Log } from "../base/log.ts";
import { downloadFromUrl } from "../models/url-download.ts";
import { extractArchive } from "./archive.ts";
import type { LlamaBinaries } from "./binaries.ts";
import { cacheDirFor, INSTALL_RECORD, installLocked, type InstallRecord } from "./install.ts";
import { fetchRelease } from "./release.ts";
import { buildFromSource, type LlamaFlavor } from "./source-build.ts";

export interface LlamaBuildOptions {
  cacheRoot: string;
  /** The cache key's build: the release the source is of. */
  tag: string;
  flavor: LlamaFlavor;
  /** A path or URL; undefined: the release's source tarball from `apiBase`. */
  source: string | undefined;
  apiBase: string;
  log: Log;
  jobs?: number;
  /** Build even when the cache holds this build already (`mesh llama build` asks for a build). */
  replace?: boolean;
}

export type SourceKind = "tree" | "bundle" | "archive";

/** What a source path is, from its name and whether it is a folder (pure). */
export function sourceKind(path: string, isDirectory: boolean): SourceKind | undefined {
  if (isDirectory) return "tree";
  if (/\.bundle$/i.test(path)) return "bundle";
  if (/\.(tar\.gz|tgz|zip)$/i.test(path)) return "archive";
  return undefined;
}

/** Runs a command; a failure carries what it printed on stderr. */
export async function sh(argv: string[], cwd: string): Promise<void> {
  const proc = Bun.spawn(argv, { cwd, stdout: "ignore", stderr: "pipe" });
  const err = await new Response(proc.stderr).text();
  if ((await proc.exited) !== 0) throw new Error(`${argv.join(" ")} failed:\n${err.trim()}`);
}

/** The llama.cpp tree inside an unpacked archive: its root, a top folder, or a bundle it carries (node-llama-cpp). */
async function treeIn(dir: string, work: string): Promise<string> {
  const look = (d: string, depth: number): string | undefined => {
    if (existsSync(join(d, "CMakeLists.txt")) && existsSync(join(d, "ggml"))) return d;
    if (depth === 0) return undefined;
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (!e.isDirectory()) continue;
      const found = look(join(d, e.name), depth - 1);
      if (found) return found;
    }
    return undefined;
  };
  const tree = look(dir, 2);
  if (tree) return tree;
  const bundle = ["package/llama/gitRelease.bundle", "llama/gitRelease.bundle"].map((p) => join(dir, p)).find((p) => existsSync(p));
  if (bundle) return cloneBundle(bundle, work);
  throw new Error("the archive holds no llama.cpp source tree (no CMakeLists.txt with ggml/ beside it) and no git bundle");
}

async function cloneBundle(bundle: string, work: string): Promise<string> {
  const dest = join(work, "src");
  await sh(["git", "clone", "--quiet", bundle, dest], work);
  return dest;
}

/** A source path or URL made into a llama.cpp tree under `work`. */
async function prepareSource(o: LlamaBuildOptions, work: string): Promise<string> {
  let path = o.source;
  if (path === undefined || /^https?:\/\//.test(path)) {
    const url = path ?? (await fetchRelease(o.apiBase, o.tag)).tarballUrl;
    if (!url) throw new Error(`release ${o.tag} lists no source tarball; pass --source`);
    const name = /\.(tar\.gz|tgz|zip|bundle)$/i.test(url) ? basename(new URL(url).pathname) : `llama.cpp-${o.tag}.tar.gz`;
    o.log.info("downloading llama.cpp source", { url });
    path = (await downloadFromUrl({ url, model: name, fileName: name, destDir: work })).path;
  }
  if (!existsSync(path)) throw new Error(`--source ${path} does not exist`);
  const kind = sourceKind(path, statSync(path).isDirectory());
  if (kind === "tree") return path;
  if (kind === "bundle") return cloneBundle(path, work);
  if (kind === "archive") {
    const unpacked = join(work, "unpacked");
    mkdirSync(unpacked, { recursive: true });
    await extractArchive(path, unpacked);
    return treeIn(unpacked, work);
  }
  throw new Error(`--source ${path}: expected a llama.cpp folder, a .tar.gz/.tgz/.zip, or a git .bundle`);
}

export async function buildLlama(o: LlamaBuildOptions): Promise<LlamaBinaries> {
  const target = cacheDirFor(o.cacheRoot, o.tag, o.flavor);
  const logFile = `${target}-build.log`;
  return installLocked(target, o.log, async (staging) => {
    const work = mkdtempSync(join(tmpdir(), "mesh-llama-build-"));
    try {
      const started = performance.now();
      const tree = await prepareSource(o, work);
      o.log.info("building llama.cpp", { flavor: o.flavor, source: o.source ?? o.tag, log: logFile, note: "several minutes" });
      rmSync(logFile, { force: true });
      const jobs = o.jobs ?? Math.max(1, navigator.hardwareConcurrency);
      const binDir = await buildFromSource({ sourceDir: tree, buildDir: join(work, "build"), flavor: o.flavor, jobs, logFile });
      const out = join(staging, "bin");
      mkdirSync(out);
      for (const name of readdirSync(binDir)) if (/^(llama-server|ggml-rpc-server|rpc-server)(\.exe)?$/.test(name)) renameSync(join(binDir, name), join(out, name));
      const record: InstallRecord = { tag: o.tag, flavor: o.flavor, from: o.source ?? `${o.tag} source` };
      writeFileSync(join(out, INSTALL_RECORD), `${JSON.stringify(record, null, 2)}\n`);
      o.log.info("llama.cpp built", { seconds: Math.round((performance.now() - started) / 1000), dir: target });
      return out;
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }, o.replace);
}
