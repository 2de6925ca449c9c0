/**
 * The receiving side of the model protocol (`peer-transfer.ts`): a model's files from a peer that
 * has them into this node's models dir. The peer's list is a claim, checked before a byte is
 * written: it must be the content the mesh knows the model by (`content-identity.ts`), name only
 * files of that model, and fit the announced size and the disk. Every file arrives as a part that
 * a cut transfer resumes, and all are installed together once each one's SHA-256 holds.
 */
import { existsSync } from "node:fs";
import { rm, stat } from "node:fs/promises";
import { join, resolve } from "node:path";
import { TimedRecv } from "../streams/read-deadline.ts";
import type { Stream } from "../streams/stream.ts";
import { readFrame, writeFrame } from "../streams/wire.ts";
import { contentIdentity } from "./content-identity.ts";
import { copyRoom } from "./download-rules.ts";
import { FileHasher } from "./file-hasher.ts";
import { arrivalName, freeBytes, isArrivalNameOf, isSafeModelName, NotTheContent, PartFile, SizeRefused, throttledProgress, TransferError, TransferRefused, type OnProgress } from "./model-transfer.ts";
import { answerDeadlineMs, FileHead, Manifest, Refusal, TRANSFER_DEADLINES, type ManifestEntry, type ModelRequest, type TransferDeadlines } from "./peer-transfer.ts";
import { readRegistry, REGISTRY_FILE } from "./registry.ts";

const READ_BUFFER = 1024 * 1024;

export interface PeerFetchOptions {
  model: string;
  /** Opens a fresh MODEL stream to the peer (its kind byte already written); called once per request. */
  open: () => Promise<Stream>;
  destDir: string;
  onProgress?: OnProgress;
  signal?: AbortSignal;
  /** The node's own hasher, so files already here are not hashed again on every call. */
  hasher?: FileHasher;
  /** The model's size as the mesh announced it: how long the peer may take to hash it for the manifest. */
  expectedBytes?: number;
  /** The content identity the mesh knows the model by (`models/content-identity.ts`): the peer's files must be that content. */
  identity: string | undefined;
  deadlines?: Partial<TransferDeadlines>;
  /** Hears the files the peer listed (before any is fetched), so a caller can find their parts should the copy be given up. */
  onManifest?: (files: readonly ManifestEntry[]) => void;
}

/** Fetches every file of `model` that `destDir` lacks from the peer; resolves with the final paths. */
export async function fetchModelFromPeer(opts: PeerFetchOptions): Promise<string[]> {
  if (!isSafeModelName(opts.model)) throw new TransferError(`model name "${opts.model}" cannot be used as a file name`);
  opts.signal?.throwIfAborted();
  const manifest = await requestManifest(opts);
  // The peer's list is its claim: the files must be the content the mesh knows the name by.
  const listed = contentIdentity(manifest);
  if (listed !== opts.identity) {
    throw new NotTheContent(
      opts.identity === undefined
        ? `the copy of "${opts.model}" is refused: the mesh agrees on no content identity for it; nothing was written`
        : `the copy of "${opts.model}" is refused: the peer's files are content ${listed.slice(0, 12)}, the mesh knows the model as ${opts.identity.slice(0, 12)}; nothing was written`,
    );
  }
  const hasher = opts.hasher ?? new FileHasher();
  // Only files mesh copied for this very model count as here already: a file put in the models dir
  // by hand (or another model's) is never taken over, so it can never be deleted as a copy later.
  const ours = readRegistry(join(opts.destDir, REGISTRY_FILE))[opts.model]?.pulled === true;
  // Bytes of each file here already: the whole file in place, or a part of it waiting to resume.
  const here = new Map<string, number>();
  const inPlace = new Set<string>();
  for (const entry of manifest) {
    const path = resolve(opts.destDir, entry.name);
    if (!existsSync(path)) here.set(entry.name, await PartFile.held(opts.destDir, entry.name, entry.sha256));
    else if (ours && (await isInPlace(path, entry, hasher))) {
      here.set(entry.name, entry.size);
      inPlace.add(entry.name);
    } else throw new TransferRefused(`${entry.name} in ${opts.destDir} is a file mesh did not copy as "${opts.model}"; it is neither replaced nor taken for a copy (rename it, or remove it if it is stale)`);
  }
  // Its sizes too are checked before a byte is written.
  const problem = copyRoom(manifest, arrivalName(opts.model, "", "projector"), opts.expectedBytes ?? 0, await freeBytes(opts.destDir), (name) => here.get(name) ?? 0);
  if (problem) throw new SizeRefused(`the copy of "${opts.model}" is refused: ${problem}; nothing was written`);
  opts.onManifest?.(manifest);
  const progress = throttledProgress(opts.model, opts.onProgress);
  let done = 0;
  progress.set({ bytes: 0, total: manifest.reduce((sum, f) => sum + f.size, 0) });
  const paths: string[] = [];
  const arrived: { part: PartFile; sha256: string }[] = [];
  const installed: string[] = [];
  try {
    for (const entry of manifest) {
      opts.signal?.throwIfAborted();
      if (!inPlace.has(entry.name)) {
        const before = done;
        arrived.push(await fetchFile(opts, entry, (bytes) => progress.set({ bytes: before + bytes })));
      }
      done += entry.size;
      progress.set({ bytes: done });
      paths.push(resolve(opts.destDir, entry.name));
    }
    // All of them or none: a copy cut short leaves parts to resume, never files in place that no
    // entry in models.json says mesh copied. The first file goes last, so a scan never sees a model
    // without its other shards.
    for (const { part, sha256 } of arrived.reverse()) {
      const { path } = await part.install(sha256);
      installed.push(path);
      // Checked as it arrived: announcing its content identity needs no second read of it.
      opts.hasher?.remember(path, sha256);
    }
  } catch (err) {
    // An install that failed part-way takes back the ones before it (each was checked; the next copy fetches them again).
    if (installed.length < arrived.length) for (const path of installed) await rm(path, { force: true });
    throw err;
  } finally {
    for (const { part } of arrived) await part.close();
  }
  progress.done();
  return paths;
}

async function isInPlace(path: string, entry: ManifestEntry, hasher: FileHasher): Promise<boolean> {
  const size = await stat(path).then((s) => s.size, () => -1);
  return size === entry.size && (await hasher.digest(path)).sha256 === entry.sha256;
}

/**
 * Sends one request on a fresh stream and reads the head of the answer, allowing for `hashBytes`
 * the peer may hash first; a refusal throws. The stream handed back reads with the idle deadline.
 */
async function request(opts: PeerFetchOptions, message: ModelRequest, hashBytes: number | undefined): Promise<{ stream: Stream; head: unknown; release: () => void }> {
  const deadlines = { ...TRANSFER_DEADLINES, ...opts.deadlines };
  const opened = await opts.open();
  const recv = new TimedRecv(opened.recv, deadlines.idleMs, "the peer");
  const stream: Stream = { send: opened.send, recv };
  const abort = () => {
    void stream.send.reset(0).catch(() => undefined);
    void stream.recv.stop(0).catch(() => undefined);
  };
  opts.signal?.addEventListener("abort", abort, { once: true });
  const release = () => opts.signal?.removeEventListener("abort", abort);
  try {
    await writeFrame(stream.send, message);
    await stream.send.finish();
    const waitMs = answerDeadlineMs(hashBytes, deadlines);
    const head = await recv.within(waitMs, `its answer to the ${message.op} request for "${opts.model}"`, () => readFrame(recv));
    if (head === null) throw new Error(`the peer closed the stream without answering the ${message.op} request for "${opts.model}"`);
    const refused = Refusal.safeParse(head);
    if (refused.success) throw new TransferError(`the peer refused model "${opts.model}": ${refused.data.error}`);
    return { stream, head, release };
  } catch (err) {
    release();
    // Whatever the peer still sends on this stream is not wanted.
    void stream.send.reset(0).catch(() => undefined);
    void recv.stop(0).catch(() => undefined);
    opts.signal?.throwIfAborted();
    throw err;
  }
}

async function requestManifest(opts: PeerFetchOptions): Promise<ManifestEntry[]> {
  const { stream, head, release } = await request(opts, { op: "manifest", model: opts.model }, opts.expectedBytes);
  release();
  await stream.recv.stop(0).catch(() => undefined);
  const manifest = Manifest.safeParse(head);
  if (!manifest.success) throw new TransferError(`the peer's list of files of "${opts.model}" is malformed`);
  const names = new Set<string>();
  for (const { name } of manifest.data.files) {
    // A peer names only the files of the model asked for: it cannot overwrite another model's.
    if (!isArrivalNameOf(opts.model, name) || names.has(name)) throw new TransferError(`the peer's list of files of "${opts.model}" names "${name}", which is not a file of that model`);
    names.add(name);
  }
  return manifest.data.files;
}

/**
 * One file into its part, exactly the one the checked manifest lists; the caller installs it (with
 * the SHA-256 it arrived with) and closes it.
 */
async function fetchFile(opts: PeerFetchOptions, want: ManifestEntry, report: (bytes: number) => void): Promise<{ part: PartFile; sha256: string }> {
  const part = await PartFile.open(opts.destDir, want.name);
  try {
    if (part.offset > 0 && part.origin?.sha256 === want.sha256 && part.offset <= want.size) await part.resume();
    else await part.restart({ size: want.size, sha256: want.sha256 });
    report(part.offset);
    const { stream, head, release } = await request(opts, { op: "file", model: opts.model, name: want.name, offset: part.offset }, want.size);
    try {
      const got = FileHead.safeParse(head);
      if (!got.success) throw new TransferError(`the peer's head for ${want.name} is malformed`);
      // The manifest was checked against the content the mesh knows the model by: another file is
      // not taken, whether it changed on the sender since or was never the one listed. The part
      // here still belongs to the listed file, and a copy from another holder resumes it.
      if (got.data.size !== want.size || got.data.sha256 !== want.sha256) {
        throw new NotTheContent(`${want.name} of "${opts.model}" is now ${got.data.size} bytes on the sending node (SHA-256 ${got.data.sha256.slice(0, 12)}), not the file its list named; none of it is taken`);
      }
      await receiveBytes(stream, part, want, report);
    } catch (err) {
      // Whatever the peer still sends is not wanted, and a socket must not stay open for it.
      void stream.send.reset(0).catch(() => undefined);
      void stream.recv.stop(0).catch(() => undefined);
      opts.signal?.throwIfAborted();
      throw err;
    } finally {
      release();
    }
    await part.verify(want.sha256);
    return { part, sha256: want.sha256 };
  } catch (err) {
    await part.close();
    throw err;
  }
}

async function receiveBytes(stream: Stream, part: PartFile, want: ManifestEntry, report: (bytes: number) => void): Promise<void> {
  // Two buffers: the next read fills one while the other is written to disk.
  const bufs = [new Uint8Array(READ_BUFFER), new Uint8Array(READ_BUFFER)];
  const cut = (why: string, cause?: unknown) =>
    new Error(`the transfer of ${want.name} ${why} after ${part.offset} of ${want.size} bytes; the partial file is kept and the next attempt resumes from there`, {
      cause,
    });
  let writing: Promise<void> = Promise.resolve();
  let received = part.offset;
  try {
    for (let i = 0; received < want.size; i ^= 1) {
      const buf = bufs[i]!;
      let n: number | null;
      try {
        n = await stream.recv.read(buf.subarray(0, Math.min(buf.length, want.size - received)));
      } catch (err) {
        throw cut(`broke (${(err as Error).message})`, err);
      }
      if (n === null) throw cut("ended early");
      received += n;
      // The write before this one must be done: this buffer is the one it wrote from.
      await writing;
      writing = part.write(buf.subarray(0, n)).then(() => report(part.offset));
      // Handled here too: a failed write must not be an unhandled rejection while a read waits.
      writing.catch(() => undefined);
    }
  } finally {
    // Whatever came before a failure is on disk (and counted) before the part is kept for a resume.
    await writing.catch(() => undefined);
  }
  await writing;
  await stream.recv.stop(0).catch(() => undefined);
}
