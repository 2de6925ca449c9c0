/**
 * Installs a llama.cpp release build into the cache on first run: the release from the API, the
 * asset for this platform and flavor, a resumable download verified against the asset's SHA-256
 * digest, extraction, a check that the binaries run, and an atomic rename into
 * `<cache>/<tag>-<flavor>/`. A lock beside it lets two nodes starting at once end with one good
 * install: the second waits and then finds it there.
 */
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import lockfile from "proper-lockfile";
import type { Log } from "../base/log.ts";
import { TransferError } from "../models/model-transfer.ts";
import { downloadFromUrl } from "../models/url-download.ts";
import { progressReporter } from "../base/progress.ts";
import { extractArchive, findBinariesBelow } from "./archive.ts";
import { chooseAsset } from "./assets.ts";
import { findLlamaBinaries, runVersion, type LlamaBinaries } from "./binaries.ts";
import { fetchRelease } from "./release.ts";
import type { LlamaFlavor } from "./source-build.ts";

/** What the cache records about an install, beside the binaries. */
export const INSTALL_RECORD = "mesh-install.json";

export interface InstallRecord {
  tag: string;
  flavor: LlamaFlavor;
  /** The release asset it came from, or the source it was built from. */
  from: string;
  sha256?: string;
}

export interface ReleaseInstallOptions {
  cacheRoot: string;
  tag: string;
  flavor: LlamaFlavor;
  apiBase: string;
  platform?: NodeJS.Platform;
  arch?: string;
  log: Log;
  fetchImpl?: typeof fetch;
}

export const cacheDirFor = (cacheRoot: string, tag: string, flavor: string) => join(cacheRoot, `${tag}-${flavor}`);

/**
 * Runs `fill(staging)` under the cache entry's lock unless the entry is there already (or
 * `replace`), then renames the staging folder into place: a reader sees no entry or a whole one.
 */
export async function installLocked(target: string, log: Log, fill: (staging: string) => Promise<string>, replace = false): Promise<LlamaBinaries> {
  const root = join(target, "..");
  mkdirSync(root, { recursive: true });
  const release = await lockfile.lock(root, {
    lockfilePath: `${target}.lock`,
    realpath: false,
    // A holder refreshes the lock while it works; one that died leaves it stale after a minute.
    stale: 60_000,
    retries: { retries: 1_000, minTimeout: 250, maxTimeout: 2_000 },
    onCompromised: (err) => log.warn("the llama.cpp install lock was taken over", { error: err.message }),
  });
  try {
    const existing = findLlamaBinaries(target);
    if (existing && !replace) return existing;
    const staging = mkdtempSync(`${target}.staging-`);
    try {
      const binDir = await fill(staging);
      rmSync(target, { recursive: true, force: true });
      renameSync(binDir, target);
    } finally {
      rmSync(staging, { recursive: true, force: true });
    }
    const installed = findLlamaBinaries(target);
    if (!installed) throw new Error(`the install into ${target} holds no binaries`);
    return installed;
  } finally {
    await release();
  }
}

/** Exits 0 and prints a version: the binary runs on this machine (libraries, CPU features). */
async function checkRuns(bin: LlamaBinaries): Promise<void> {
  const { code, text } = await runVersion(bin);
  if (code !== 0) throw new Error(`the downloaded llama-server does not run here (exit ${code}): ${text.trim().split("\n").slice(-3).join(" ")}`);
}

export async function installRelease(o: ReleaseInstallOptions): Promise<LlamaBinaries> {
  const target = cacheDirFor(o.cacheRoot, o.tag, o.flavor);
  return installLocked(target, o.log, async (staging) => {
    const release = await fetchRelease(o.apiBase, o.tag, o.fetchImpl);
    const choice = chooseAsset(release.assets, o.tag, o.platform ?? process.platform, o.arch ?? process.arch, o.flavor);
    if ("error" in choice) throw new Error(choice.error);
    const { asset } = choice;
    const sha256 = /^sha256:([0-9a-f]{64})$/i.exec(asset.digest ?? "")?.[1]?.toLowerCase();
    if (!sha256) throw new Error(`the release lists no SHA-256 digest for ${asset.name}, so it cannot be verified; nothing was installed`);
    o.log.info("downloading llama.cpp", { release: o.tag, flavor: o.flavor, asset: asset.name, mib: (asset.size / 2 ** 20).toFixed(1) });
    const downloads = join(o.cacheRoot, ".downloads");
    const progress = progressReporter(`llama.cpp ${asset.name}`, o.log);
    let got;
    try {
      got = await downloadFromUrl({
        url: asset.url,
        model: asset.name,
        fileName: asset.name,
        destDir: downloads,
        sha256,
        onProgress: (p) => progress.update(p.bytes, p.total || asset.size),
        ...(o.fetchImpl ? { fetchImpl: o.fetchImpl } : {}),
      });
    } catch (err) {
      if (err instanceof TransferError) throw new Error(`${err.message}; nothing was installed`);
      throw err;
    } finally {
      progress.done();
    }
    const unpacked = join(staging, "unpacked");
    mkdirSync(unpacked);
    await extractArchive(got.path, unpacked);
    rmSync(got.path, { force: true });
    const bin = findBinariesBelow(unpacked);
    if (!bin) throw new Error(`${asset.name} holds no llama-server with an rpc-server beside it; nothing was installed`);
    await checkRuns(bin);
    const record: InstallRecord = { tag: o.tag, flavor: o.flavor, from: asset.url, sha256 };
    writeFileSync(join(bin.dir, INSTALL_RECORD), `${JSON.stringify(record, null, 2)}\n`);
    o.log.info("llama.cpp installed", { release: o.tag, flavor: o.flavor, dir: target, archive: basename(got.path) });
    return bin.dir;
  });
}
