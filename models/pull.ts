/**
 * `mesh pull REF`: a model from Hugging Face (or a URL) into the models dir, whole or not at all.
 * The Hub's tree says which files (the quant, every shard, the projector) and each one's size and
 * SHA-256; the disk must have room for them before a byte is fetched; each file is fetched into
 * `<modelsDir>/.pulls/` (a cut download resumes from there, now or on the next pull) and checked
 * against its hash; only when every file is there are they moved into `<modelsDir>/hf/<org>/<repo>/`
 * (the first shard last, so a scan never sees a model without its other shards) and the model
 * written into models.json with its exact reference. Progress goes to the caller, who draws it.
 */
import { existsSync, mkdirSync, readdirSync, statSync } from "node:fs";
import { rename, rm } from "node:fs/promises";
import { dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import type { Log } from "../base/log.ts";
import { FREE_SPACE_MARGIN, PEER_SOURCE_RULE, peerSizeLimit, type SizeLimit, type SourceRule } from "./download-rules.ts";
import { selectRepoFiles } from "./hf-files.ts";
import { checkFileAccess, listRepoFiles, authHeaders, resolveUrl, type HubConfig } from "./hf-hub.ts";
import { defaultModelName, exactRef, fileNameOf, pullableRef, refSatisfies, type ModelRef } from "./model-ref.ts";
import { groupModelFiles } from "./model-files.ts";
import { listGguf } from "./model-store.ts";
import { FileHasher } from "./file-hasher.ts";
import { DiskFull, freeBytes, hashFileInto, HashMismatch, isSafeModelName, moveUnlessTaken, PARTIAL_DIR, SizeRefused, TransferError, TransferRefused } from "./model-transfer.ts";
import { PullError } from "./pull-error.ts";
import { PULLS_DIR, readRegistry, REGISTRY_FILE, writeRegistryEntry, type RegistryEntry } from "./registry.ts";
import { downloadFromUrl } from "./url-download.ts";

export { PullError, type PullErrorCode } from "./pull-error.ts";

export interface PullProgress {
  /** The file being fetched: its path in the repository, or its URL's file name. */
  file: string;
  /** Which file this is, from 1 to `fileCount`. */
  fileIndex: number;
  fileCount: number;
  /** Bytes of this file here so far, and its size (0 while not known). */
  bytes: number;
  total: number;
  /** The same over every file of the pull (files already here count as done). */
  allBytes: number;
  allTotal: number;
}

export interface PullOptions {
  ref: string;
  name?: string;
  modelsDir: string;
  hub: HubConfig;
  onProgress?: (p: PullProgress) => void;
  signal?: AbortSignal;
  log?: Log;
  /** peer-announced refs: URL refs held to PEER_SOURCE_RULE */
  fromPeer?: boolean;
}

export interface PulledModel {
  name: string;
  /** The exact reference models.json records: the same files for whoever pulls it. */
  ref: string;
  /** The first shard (what llama-server loads), absolute. */
  path: string;
  /** The model's files, shards in order, absolute. */
  files: string[];
  mmproj: string | undefined;
  /** Bytes on disk of the model's files and its projector. */
  sizeBytes: number;
  alreadyHad: boolean;
}

/** A download that gets no byte for this long is stopped (its part kept for the next pull). */
const STALL_MS = 60_000;

/** One file of a pull: where it comes from, where it goes, what it must be. */
interface PlannedFile {
  /** Path in the repository, or the URL's file name. */
  label: string;
  url: string;
  /** Relative to the models dir. */
  rel: string;
  size: number | undefined;
  sha256: string | undefined;
  gitOid: string | undefined;
}

interface Plan {
  ref: string;
  /** The model's files, first shard first. */
  files: PlannedFile[];
  mmproj: PlannedFile | undefined;
  /** Headers for the downloads (the token, for the Hub's endpoint only). */
  headers: Record<string, string>;
  /** Files of a URL reference go where other files may already be: never over them. */
  replace: boolean;
  /** Where a download may connect (a URL a peer announced), if anywhere is not fine. */
  rule: SourceRule | undefined;
}

const hasher = new FileHasher();
const inFlight = new Map<string, Promise<unknown>>();

export async function pullModel(opts: PullOptions): Promise<PulledModel> {
  const parsed = pullableRef(opts.ref);
  const name = opts.name?.trim() || defaultModelName(opts.ref);
  if (!isSafeModelName(name)) throw new PullError("bad_reference", `"${name}" cannot be a model name (at most 4 '/'-separated parts, none starting with '.')`);
  const modelsDir = resolve(opts.modelsDir);
  // Two pulls of one name in this process: the second waits and then finds the model there.
  const key = `${modelsDir}\0${name}`;
  while (inFlight.has(key)) await inFlight.get(key)!.catch(() => undefined);
  const work = pull({ ...opts, modelsDir }, parsed, name).catch((err: unknown) => {
    if (err instanceof PullError || !opts.signal?.aborted) throw err;
    throw new PullError("download_failed", `the pull of ${opts.ref.trim()} was stopped before it downloaded anything; nothing was installed`, { cause: err });
  });
  inFlight.set(key, work);
  try {
    return await work;
  } finally {
    inFlight.delete(key);
  }
}

/** The model file the models dir names `name` by itself (in a subfolder too) that models.json gives no other name. */
function unregisteredNamed(modelsDir: string, name: string, registry: Record<string, RegistryEntry>): string | undefined {
  const registered = new Set(Object.values(registry).map((e) => resolve(modelsDir, e.file)));
  return groupModelFiles(listGguf(modelsDir)).find((g) => g.name === name && !registered.has(resolve(modelsDir, g.path)))?.path;
}

async function pull(opts: PullOptions, ref: ModelRef, name: string): Promise<PulledModel> {
  const { modelsDir, log } = opts;
  if (opts.fromPeer && ref.kind === "url" && !ref.url.startsWith("https:")) throw new PullError("bad_reference", `${ref.url} is refused: a source a peer announced must be https`);
  mkdirSync(join(modelsDir, PULLS_DIR), { recursive: true });
  const registry = readRegistry(join(modelsDir, REGISTRY_FILE));
  const existing = registry[name];
  if (existing) {
    if (!existing.pulled || existing.ref === undefined || !refSatisfies(existing.ref, ref)) {
      const what = existing.ref ? `pulled from ${existing.ref}` : `its file is ${existing.file}`;
      throw new PullError("name_taken", `"${name}" is already the name of another model in ${REGISTRY_FILE} (${what}); pull under another name`);
    }
    const had = describeInstalled(modelsDir, name, existing);
    if (had) return had;
  } else {
    const named = unregisteredNamed(modelsDir, name, registry);
    if (named) throw new PullError("name_taken", `"${name}" is already the name of ${named} in ${modelsDir}; pull under another name`);
  }

  const plan = ref.kind === "hf" ? await planHub(opts, ref) : planUrl(ref, opts.fromPeer === true);
  const all = [...plan.files, ...(plan.mmproj ? [plan.mmproj] : [])];
  for (const f of all) insideModelsDir(modelsDir, f.rel);
  const present = await Promise.all(all.map((f) => isInstalled(modelsDir, f, plan.replace)));
  const missing = all.filter((_, i) => !present[i]);
  log?.info("pulling model", { name, ref: plan.ref, files: all.length, toFetch: missing.length });

  const free = await freeBytes(modelsDir);
  const need = missing.reduce((sum, f) => sum + Math.max(0, (f.size ?? 0) - stagedBytes(modelsDir, f)), 0);
  const problem = spaceProblem(need, free);
  if (problem) throw new PullError("no_space", `${plan.ref} does not fit in ${modelsDir}: ${problem}`);
  if (ref.kind === "hf") for (const f of missing) await checkFileAccess(opts.hub, ref.repo, ref.revision, f.label, { signal: opts.signal });

  const staged = new Map<PlannedFile, string>();
  const sizes = all.map((f) => f.size ?? 0);
  const allTotal = sizes.reduce((a, b) => a + b, 0);
  let doneBytes = 0;
  for (const [i, f] of all.entries()) {
    const report = (bytes: number, total: number) =>
      opts.onProgress?.({ file: f.label, fileIndex: i + 1, fileCount: all.length, bytes, total, allBytes: doneBytes + bytes, allTotal: Math.max(allTotal, doneBytes + total) });
    if (present[i]) {
      report(sizes[i]!, sizes[i]!);
    } else {
      const path = await fetchFile(opts, plan, f, free, report);
      staged.set(f, path);
      sizes[i] = statSync(path).size;
    }
    doneBytes += sizes[i]!;
  }

  // The projector and the later shards first: the model appears, to a scan, only once it is whole.
  const installOrder = [...all.slice(1), all[0]!];
  for (const f of installOrder) {
    const from = staged.get(f);
    if (from) await install(from, join(modelsDir, f.rel), plan.replace);
  }
  await writeRegistryEntry(modelsDir, name, {
    file: plan.files[0]!.rel,
    ...(plan.mmproj ? { mmproj: plan.mmproj.rel } : {}),
    ref: plan.ref,
    pulled: true,
  });
  for (const f of staged.keys()) await rm(stageDir(modelsDir, f), { recursive: true, force: true });
  log?.info("model pulled", { name, ref: plan.ref, fetched: staged.size });
  const files = plan.files.map((f) => join(modelsDir, f.rel));
  const mmproj = plan.mmproj && join(modelsDir, plan.mmproj.rel);
  return { name, ref: plan.ref, path: files[0]!, files, mmproj, sizeBytes: diskBytes([...files, ...(mmproj ? [mmproj] : [])]), alreadyHad: false };
}

/** Why `need` bytes do not fit in `free` bytes with the margin left over, or undefined when they do. */
export function spaceProblem(need: number, free: number): string | undefined {
  if (need <= 0 || need + FREE_SPACE_MARGIN <= free) return undefined;
  const gib = (b: number) => `${(b / 2 ** 30).toFixed(1)} GiB`;
  return `it needs ${gib(need)} more and ${gib(free)} are free (${gib(FREE_SPACE_MARGIN)} is kept free); free some space or pull a smaller quant`;
}

async function planHub(opts: PullOptions, ref: Extract<ModelRef, { kind: "hf" }>): Promise<Plan> {
  const entries = await listRepoFiles(opts.hub, ref.repo, ref.revision, { signal: opts.signal });
  const selection = selectRepoFiles(ref.repo, entries, { quant: ref.quant, file: ref.file });
  const plan = (f: (typeof selection.files)[number]): PlannedFile => {
    if (f.sha256 === undefined && f.gitOid === undefined) throw new PullError("download_failed", `the Hub states no hash for ${ref.repo}/${f.path}, so it could not be verified; not pulled`);
    return { label: f.path, url: resolveUrl(opts.hub, ref.repo, ref.revision, f.path), rel: join("hf", ...ref.repo.split("/"), ...f.path.split("/")), size: f.size, sha256: f.sha256, gitOid: f.gitOid };
  };
  return {
    ref: exactRef(ref, selection.files[0]!.path),
    files: selection.files.map(plan),
    mmproj: selection.mmproj && plan(selection.mmproj),
    headers: authHeaders(opts.hub),
    replace: true,
    // The endpoint is the operator's (HF_ENDPOINT); a peer's reference only picks files there.
    rule: undefined,
  };
}

const SHARD = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/i;

/** Every shard of the split whose shard `file` (a path or a file name) is, in order; `[file]` for a file that is no shard. */
function shardsOf(file: string): string[] {
  const m = SHARD.exec(file);
  if (!m) return [file];
  return Array.from({ length: Number(m[3]) }, (_, i) => `${m[1]}-${String(i + 1).padStart(5, "0")}-of-${m[3]}.gguf`);
}

/** A URL reference: the file, and for a shard of a split every shard, by the split's names. */
function planUrl(ref: Extract<ModelRef, { kind: "url" }>, fromPeer: boolean): Plan {
  const url = new URL(ref.url);
  const name = fileNameOf(url)!;
  const shard = SHARD.exec(name);
  const count = shard ? Number(shard[3]) : 1;
  if (count < 1 || count > 512) throw new PullError("bad_reference", `${ref.url} names a split of ${count} shards; refusing`);
  const urls = !shard
    ? [url]
    : shardsOf(name).map((file) => {
        const u = new URL(url);
        u.pathname = `${u.pathname.slice(0, u.pathname.lastIndexOf("/") + 1)}${encodeURIComponent(file)}`;
        return u;
      });
  const files = urls.map((u) => {
    const file = fileNameOf(u)!;
    return { label: file, url: u.href, rel: file, size: undefined, sha256: undefined, gitOid: undefined };
  });
  return { ref: files[0]!.url, files, mmproj: undefined, headers: {}, replace: false, rule: fromPeer ? PEER_SOURCE_RULE : undefined };
}

/** Refuses a file that would land outside the models dir (a check behind the path rules, not instead of them). */
function insideModelsDir(modelsDir: string, rel: string): void {
  const back = relative(modelsDir, resolve(modelsDir, rel));
  if (back === "" || back.startsWith("..") || isAbsolute(back) || back.split(sep).some((s) => s.startsWith("."))) {
    throw new PullError("bad_reference", `the file ${rel} would not lie in the models dir; refused`);
  }
}

/**
 * Whether a file is in place already: a Hub file with the right hash (pulled before, under
 * another name or another quant's pull). A URL's file is never taken on trust: one in the way is
 * another's, and the pull stops before downloading anything.
 */
async function isInstalled(modelsDir: string, f: PlannedFile, owned: boolean): Promise<boolean> {
  const path = join(modelsDir, f.rel);
  if (!existsSync(path)) return false;
  if (!owned) throw new PullError("name_taken", `${f.rel} already exists in ${modelsDir}; it is not replaced, as it may be another model's file (remove or rename it, or pull under another name)`);
  if (f.size !== undefined && statSync(path).size !== f.size) return false;
  return verifies(path, f);
}

async function verifies(path: string, f: PlannedFile): Promise<boolean> {
  if (f.sha256 !== undefined) return (await hasher.digest(path)).sha256 === f.sha256;
  if (f.gitOid !== undefined) return (await gitBlobOid(path)) === f.gitOid;
  return false;
}

/** A file's git blob id: SHA-1 of `blob <size>\0` and its bytes; what the Hub gives for a file that is not in LFS. */
async function gitBlobOid(path: string): Promise<string> {
  const h = new Bun.CryptoHasher("sha1");
  h.update(`blob ${statSync(path).size}\0`);
  await hashFileInto(h, path);
  return h.digest("hex");
}

/** A file's own staging folder: by its hash, so a later pull of the same bytes resumes it, whatever its name. */
function stageDir(modelsDir: string, f: PlannedFile): string {
  const key = f.sha256 ?? f.gitOid ?? `url-${new Bun.CryptoHasher("sha256").update(f.url).digest("hex").slice(0, 32)}`;
  return join(modelsDir, PULLS_DIR, key);
}

const stagedFile = (dir: string) => (existsSync(dir) ? readdirSync(dir).find((e) => /\.gguf$/i.test(e) && !e.startsWith(".")) : undefined);

/** Bytes of a file already staged (whole, or a part a cut download left). */
function stagedBytes(modelsDir: string, f: PlannedFile): number {
  const dir = stageDir(modelsDir, f);
  const whole = stagedFile(dir);
  if (whole) return statSync(join(dir, whole)).size;
  const parts = join(dir, PARTIAL_DIR);
  if (!existsSync(parts)) return 0;
  return readdirSync(parts)
    .filter((e) => e.endsWith(".part"))
    .reduce((sum, e) => sum + statSync(join(parts, e)).size, 0);
}

/** Downloads one file into its staging folder and checks it; returns the staged path. */
async function fetchFile(opts: PullOptions, plan: Plan, f: PlannedFile, free: number, report: (bytes: number, total: number) => void): Promise<string> {
  const dir = stageDir(opts.modelsDir, f);
  const earlier = stagedFile(dir);
  if (earlier) {
    // Staged by a pull that stopped before it installed: good if its bytes are right.
    if ((f.sha256 || f.gitOid) && (await verifies(join(dir, earlier), f))) {
      report(f.size ?? 0, f.size ?? 0);
      return join(dir, earlier);
    }
    await rm(join(dir, earlier), { force: true });
  }
  const limit: SizeLimit = opts.fromPeer
    ? peerSizeLimit(f.size ?? 0, free)
    : { maxBytes: Math.max(0, free - FREE_SPACE_MARGIN), requireLength: false, why: `the free space of ${opts.modelsDir} less ${FREE_SPACE_MARGIN / 2 ** 30} GiB` };
  const stall = new AbortController();
  let timer = setTimeout(() => stall.abort(), STALL_MS);
  const signal = opts.signal ? AbortSignal.any([opts.signal, stall.signal]) : stall.signal;
  try {
    const got = await downloadFromUrl({
      url: f.url,
      model: "file",
      destDir: dir,
      sha256: f.sha256,
      headers: plan.headers,
      signal,
      limit,
      ...(plan.rule ? { rule: plan.rule } : {}),
      onProgress: (p) => {
        clearTimeout(timer);
        timer = setTimeout(() => stall.abort(), STALL_MS);
        report(p.bytes, f.size ?? p.total);
      },
    });
    if (f.sha256 === undefined && f.gitOid !== undefined && (await gitBlobOid(got.path)) !== f.gitOid) {
      await rm(got.path, { force: true });
      throw hashMismatch(f);
    }
    if (!got.verified && f.gitOid === undefined) opts.log?.warn("the source gave no hash to check the download against", { file: f.label, url: f.url });
    return got.path;
  } catch (err) {
    if (err instanceof PullError) throw err;
    const kept = `the part downloaded so far is kept in ${dir}, and pulling again resumes from it; nothing was installed`;
    if (opts.signal?.aborted) throw new PullError("download_failed", `the pull of ${f.label} was stopped; ${kept}`, { cause: err });
    if (stall.signal.aborted) throw new PullError("download_failed", `${f.url} sent nothing for ${STALL_MS / 1000} s; ${kept}`, { cause: err });
    // The limit is the free space (a peer's source is held to what the mesh announced instead).
    if (err instanceof SizeRefused && !opts.fromPeer) {
      throw new PullError("no_space", `${f.label} does not fit in ${opts.modelsDir}: ${err.message}`, { cause: err });
    }
    // Space there was when it began went to something else meanwhile.
    if (err instanceof DiskFull) throw new PullError("no_space", `${f.label} no longer fits in ${opts.modelsDir}: ${err.message}; nothing was installed`, { cause: err });
    if (err instanceof HashMismatch) {
      await rm(dir, { recursive: true, force: true });
      throw hashMismatch(f, err);
    }
    const message = err instanceof TransferError ? `${err.message}; nothing was installed` : `downloading ${f.label} failed: ${(err as Error).message}; ${kept}`;
    throw new PullError("download_failed", message, { cause: err });
  } finally {
    clearTimeout(timer);
  }
}

function hashMismatch(f: PlannedFile, cause?: Error): PullError {
  return new PullError(
    "hash_mismatch",
    `${f.label} arrived with other bytes than its source states (${f.sha256 ? `SHA-256 ${f.sha256}` : `git ${f.gitOid}`}); it was removed and nothing was installed; pulling again downloads it anew`,
    { cause },
  );
}

/** Moves a staged file into place: over an older copy of a Hub file (ours); never over someone else's file. */
async function install(from: string, to: string, replace: boolean): Promise<void> {
  mkdirSync(dirname(to), { recursive: true });
  if (replace) return rename(from, to);
  try {
    await moveUnlessTaken(from, to);
  } catch (err) {
    if (err instanceof TransferRefused) throw new PullError("name_taken", `${to} appeared while the pull ran; it was left as it is`, { cause: err });
    throw err;
  }
}

/** The model as a registry entry says it is installed, or undefined when a file of it is gone. */
function describeInstalled(modelsDir: string, name: string, e: RegistryEntry): PulledModel | undefined {
  const abs = (p: string) => (isAbsolute(p) ? p : join(modelsDir, p));
  const path = abs(e.file);
  const files = shardsOf(path);
  const mmproj = e.mmproj && abs(e.mmproj);
  const all = [...files, ...(mmproj ? [mmproj] : [])];
  if (!all.every((f) => existsSync(f))) return undefined;
  return { name, ref: e.ref!, path, files, mmproj, sizeBytes: diskBytes(all), alreadyHad: true };
}

const diskBytes = (files: readonly string[]) => files.reduce((sum, f) => sum + statSync(f).size, 0);

