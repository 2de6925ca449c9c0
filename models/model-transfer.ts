/**
 * What moving a model's files onto this node needs, from a peer (`peer-transfer.ts`) or from a
 * URL (`url-download.ts`) alike: the names files get on arrival, SHA-256 of files on disk (cached
 * per file version), the partial file under `<destDir>/.partial/` that a cut transfer resumes
 * from and that is renamed into place only once its hash is right, and throttled progress.
 */
import { existsSync } from "node:fs";
import { link, mkdir, open, readFile, rename, rm, stat, statfs, writeFile, type FileHandle } from "node:fs/promises";
import { basename, dirname, join, relative, resolve, sep } from "node:path";
import { z } from "zod";

export const SHA256_HEX = /^[0-9a-f]{64}$/;
/** The models-dir scan skips dot-folders, so half-arrived files are never listed as models. */
export const PARTIAL_DIR = ".partial";

export interface TransferProgress {
  model: string;
  /** Bytes of the model present on this node, counting files skipped and prefixes resumed. */
  bytes: number;
  /** 0 while the size is not known yet (a URL whose server sent no length). */
  total: number;
}
export type OnProgress = (p: TransferProgress) => void;

/** A failure that trying again cannot fix (a hash mismatch, a refusal); others may be retried. */
export class TransferError extends Error {}

/** Refused by a rule, not by bad luck (a file in the way, a source the rules forbid): the same next time. */
export class TransferRefused extends TransferError {}

/** A peer offered files that are not the content the mesh knows the model by: that peer's fault, not the model's. */
export class NotTheContent extends TransferError {}

/** Refused by the caller's size limit (`SizeLimit`): the file is, or may be, larger than it allows. */
export class SizeRefused extends TransferRefused {}

/** The bytes that arrived are not the ones the expected SHA-256 names; the part is gone, so the next try starts over. */
export class HashMismatch extends TransferError {}

/** The disk filled up under a transfer: trying again cannot help until space is freed there (the part is removed). */
export class DiskFull extends TransferError {}

const SHARD_SUFFIX = /-(\d{5})-of-(\d{5})\.gguf$/i;
// One folder segment of a model name: nothing a scan would skip, nothing that climbs out.
// No control characters either: a name ends up in file names, log lines and announcements.
const SAFE_SEGMENT = /^[^./\\\x00-\x1f\x7f][^/\\\x00-\x1f\x7f]{0,254}$/;

/** A model name that can become file names under the models dir (the scan may qualify it with folders). */
export function isSafeModelName(model: string): boolean {
  const segments = model.split("/");
  return segments.length <= 4 && segments.every((s) => SAFE_SEGMENT.test(s) && s !== "..");
}

/**
 * The name a file of `model` gets on the receiving node, so that its models-dir scan calls the
 * model what the sender calls it: `<model>.gguf`, a shard keeps its suffix
 * (`<model>-00001-of-00002.gguf`), a projector is `mmproj-<model>.gguf` so it pairs by name.
 */
export function arrivalName(model: string, originalFile: string, kind: "model" | "projector"): string {
  if (!isSafeModelName(model)) throw new TransferError(`model name "${model}" cannot be used as a file name`);
  const dir = model.includes("/") ? `${dirname(model)}/` : "";
  const base = basename(model);
  if (kind === "projector") return `${dir}mmproj-${base}.gguf`;
  const shard = SHARD_SUFFIX.exec(basename(originalFile));
  return shard ? `${dir}${base}-${shard[1]}-of-${shard[2]}.gguf` : `${dir}${base}.gguf`;
}

/** Whether `name` is one `arrivalName` can give for `model`: a peer cannot make us write any other file. */
export function isArrivalNameOf(model: string, name: string): boolean {
  if (!isSafeModelName(model)) return false;
  const base = basename(model);
  const dir = model.includes("/") ? `${dirname(model)}/` : "";
  if (!name.startsWith(dir)) return false;
  const file = name.slice(dir.length);
  if (file === `${base}.gguf` || file === `mmproj-${base}.gguf`) return true;
  return file.startsWith(`${base}-`) && file.length === base.length + "-00001-of-00002.gguf".length && SHARD_SUFFIX.test(file);
}

/** Feeds the first `length` bytes of a file (all of it when undefined) to `hasher`, streaming. */
export async function hashFileInto(hasher: Bun.CryptoHasher, path: string, length?: number): Promise<void> {
  const file = Bun.file(path);
  for await (const chunk of (length === undefined ? file : file.slice(0, length)).stream()) hasher.update(chunk);
}


/** Where a file comes from, kept beside its part: a part of another version is not resumed. */
const PartOriginSchema = z.object({ size: z.int().min(0).optional(), sha256: z.string().optional(), etag: z.string().optional() });
export type PartOrigin = z.infer<typeof PartOriginSchema>;

// Two transfers appending to one part would interleave their bytes.
const partsInUse = new Set<string>();

/** How many bytes a part takes between flushes to disk while it arrives. */
const FLUSH_EVERY_BYTES = 8 * 1024 * 1024;

/**
 * A file arriving at `<destDir>/<name>`: bytes go to `<destDir>/.partial/<name>.part` and into a
 * running hash; `install` checks the hash and renames the part into place.
 */
export class PartFile {
  private hasher = new Bun.CryptoHasher("sha256");
  private handle: FileHandle | undefined;
  /**
   * A flush to disk started while bytes still arrive, so the one `install` must wait for has
   * little left (a whole model's flush at the end cost a copy ~15% of its time).
   */
  private flushing: Promise<void> | undefined;
  /** A background flush's failure: Linux reports a writeback error once per file, so it is kept for `install`. */
  private flushError: Error | undefined;
  private unflushed = 0;
  private constructor(
    readonly finalPath: string,
    readonly partPath: string,
    private readonly originPath: string,
    /** Bytes in the part (and in the hash). */
    public offset: number,
    /** The origin recorded with the bytes already there. */
    public origin: PartOrigin | undefined,
  ) {}

  /** Where the part of `name` in `destDir` lies, and its record. */
  private static paths(destDir: string, name: string): { finalPath: string; partPath: string; originPath: string } {
    const root = resolve(destDir);
    const finalPath = resolve(root, name);
    const rel = relative(root, finalPath);
    if (rel.startsWith("..") || rel.startsWith(sep) || rel === "") throw new TransferError(`file name "${name}" lies outside ${destDir}`);
    const partPath = join(root, PARTIAL_DIR, `${rel}.part`);
    return { finalPath, partPath, originPath: `${partPath}.json` };
  }

  private static async existing(partPath: string, originPath: string): Promise<{ offset: number; origin: PartOrigin | undefined }> {
    const offset = await stat(partPath).then((s) => s.size, () => 0);
    // A record that cannot be read is no record: the part is then checked by its hash alone.
    const origin = await readFile(originPath, "utf8").then((t) => PartOriginSchema.safeParse(JSON.parse(t)).data, () => undefined);
    return { offset, origin };
  }

  /** Bytes a part of `name` already holds toward the file whose SHA-256 is `sha256` (0 for none, or another file's). */
  static async held(destDir: string, name: string, sha256: string): Promise<number> {
    const { partPath, originPath } = PartFile.paths(destDir, name);
    const { offset, origin } = await PartFile.existing(partPath, originPath);
    return origin?.sha256 === sha256 ? offset : 0;
  }

  /** Claims the part for `name` in `destDir`; release it with `close`. Nothing is hashed yet. */
  static async open(destDir: string, name: string): Promise<PartFile> {
    const { finalPath, partPath, originPath } = PartFile.paths(destDir, name);
    if (partsInUse.has(partPath)) throw new TransferError(`${name} is already being downloaded into ${destDir}`);
    partsInUse.add(partPath);
    try {
      await mkdir(dirname(partPath), { recursive: true });
      const { offset, origin } = await PartFile.existing(partPath, originPath);
      return new PartFile(finalPath, partPath, originPath, offset, origin);
    } catch (err) {
      partsInUse.delete(partPath);
      throw err;
    }
  }

  /** Keeps the bytes already there and hashes them, so the new bytes continue the same hash. */
  async resume(): Promise<void> {
    if (this.offset > 0) await hashFileInto(this.hasher, this.partPath, this.offset);
    this.handle = await open(this.partPath, "a");
  }

  /** Drops what is there and starts an empty part from `origin`. */
  async restart(origin: PartOrigin): Promise<void> {
    await this.flushing;
    await this.handle?.close();
    this.hasher = new Bun.CryptoHasher("sha256");
    this.offset = 0;
    this.unflushed = 0;
    this.flushError = undefined;
    this.handle = await open(this.partPath, "w");
    await this.setOrigin(origin);
  }

  /** Records where the bytes come from, once a response has said more about it. */
  async setOrigin(origin: PartOrigin): Promise<void> {
    this.origin = origin;
    await writeFile(this.originPath, JSON.stringify(origin));
  }

  async write(bytes: Uint8Array): Promise<void> {
    if (!this.handle) throw new Error("PartFile.write before resume or restart");
    let done = 0;
    try {
      while (done < bytes.length) done += (await this.handle.write(bytes, done, bytes.length - done)).bytesWritten;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== "ENOSPC" && code !== "EDQUOT") throw err;
      // Resuming would need the very space that is missing, and the part would keep the disk full for everything else.
      await this.discard();
      throw new DiskFull(`the disk of ${dirname(this.finalPath)} is full (${code}): ${basename(this.finalPath)} stopped after ${this.offset + done} bytes and its partial file was removed; free space there and try again`, { cause: err });
    }
    this.hasher.update(bytes);
    this.offset += bytes.length;
    this.unflushed += bytes.length;
    if (this.unflushed >= FLUSH_EVERY_BYTES && !this.flushing) {
      this.unflushed = 0;
      this.flushing = this.handle
        .datasync()
        .catch((err: Error) => void (this.flushError ??= err))
        .finally(() => (this.flushing = undefined));
    }
  }

  /**
   * Checks the hash (when one is expected) and renames the part into place. A wrong hash removes
   * the part: its bytes are bad somewhere, and resuming from them could never succeed. A file
   * already under the final name is never replaced (it may be another model's) unless `replace`
   * says this file owns the name (a download folder of its own).
   */
  async install(expectedSha256: string | undefined, opts: { replace?: boolean } = {}): Promise<{ path: string; sha256: string }> {
    const sha256 = await this.verify(expectedSha256);
    await mkdir(dirname(this.finalPath), { recursive: true });
    if (opts.replace) await rename(this.partPath, this.finalPath);
    else await moveUnlessTaken(this.partPath, this.finalPath);
    await rm(this.originPath, { force: true });
    return { path: this.finalPath, sha256 };
  }

  /**
   * The part whole on disk and its hash checked, without installing it yet (a model's files are
   * checked one by one, then installed together); a wrong hash removes it. Once only: the hash is kept.
   */
  async verify(expectedSha256: string | undefined): Promise<string> {
    if (this.verified !== undefined) return this.verified;
    if (!this.handle) throw new Error("PartFile.verify before resume or restart");
    // The rename must not land before the bytes do, or a crash leaves a short file under the final name.
    await this.flushing;
    await this.handle.datasync();
    if (this.flushError) throw this.flushError;
    await this.handle.close();
    this.handle = undefined;
    const sha256 = this.hasher.digest("hex");
    if (expectedSha256 !== undefined && sha256 !== expectedSha256) {
      await this.discard();
      throw new HashMismatch(
        `${basename(this.finalPath)} arrived with SHA-256 ${sha256}, expected ${expectedSha256}; the partial file was removed, so the next attempt starts over`,
      );
    }
    this.verified = sha256;
    return sha256;
  }

  private verified: string | undefined;

  async discard(): Promise<void> {
    await this.flushing;
    await this.handle?.close();
    this.handle = undefined;
    await rm(this.partPath, { force: true });
    await rm(this.originPath, { force: true });
    this.offset = 0;
  }

  /** Releases the part; bytes written stay for the next attempt. */
  async close(): Promise<void> {
    try {
      await this.flushing;
      await this.handle?.close();
    } finally {
      this.handle = undefined;
      partsInUse.delete(this.partPath);
    }
  }
}

/** The refusal when a file arrives under a name another file already has. */
export function nameTaken(path: string): TransferRefused {
  return new TransferRefused(`${basename(path)} already exists in ${dirname(path)}; it is not replaced, as it may be another model's file (rename it, or remove it if it is stale)`);
}

/**
 * Moves `from` to `to` unless something is there (then `nameTaken`): a hard link fails atomically
 * on an existing name, where a rename would replace it. Where hard links are not to be had (FAT,
 * some network mounts) it checks, then renames, leaving a narrow race.
 */
export async function moveUnlessTaken(from: string, to: string): Promise<void> {
  try {
    await link(from, to);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") throw nameTaken(to);
    if (existsSync(to)) throw nameTaken(to);
    await rename(from, to);
    return;
  }
  await rm(from, { force: true });
}

/** Calls `onProgress` at most every `intervalMs`, and always for the last report. */
export function throttledProgress(model: string, onProgress: OnProgress | undefined, intervalMs = 500) {
  let bytes = 0;
  let total = 0;
  let last = Number.NEGATIVE_INFINITY;
  const emit = () => onProgress?.({ model, bytes, total });
  const set = (next: { bytes?: number; total?: number }): void => {
    bytes = next.bytes ?? bytes;
    total = next.total ?? total;
    const now = performance.now();
    if (now - last < intervalMs) return;
    last = now;
    emit();
  };
  return { set, add: (n: number) => set({ bytes: bytes + n }), done: emit };
}

/** Waits `ms`, or rejects as soon as `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((res, rej) => {
    if (signal?.aborted) return rej(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      rej(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      res();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Bytes free to this user on the file system of `dir`. */
export async function freeBytes(dir: string): Promise<number> {
  const fs = await statfs(dir);
  return fs.bavail * fs.bsize;
}
