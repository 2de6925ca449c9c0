/**
 * A model's files from the node that has them to one that lacks them, over mesh streams of kind
 * MODEL, one request per stream, as one frame: `{op: "manifest", model}` is answered with
 * `{files: [{name, size, sha256}]}`; `{op: "file", model, name, offset}` with a head
 * `{size, sha256}` and then the file's bytes from `offset` to its end. A refusal is `{error}`.
 * The server looks a name up in the asked model's own list of files: nothing a peer sends is ever
 * used as a path. The receiver resumes a cut file from its part and installs it only when the
 * whole file's SHA-256 matches. Each side waits for the other only so long (`TransferDeadlines`):
 * a peer that never answers, or stops sending mid-file, is given up on and another one tried.
 */
import { basename, join, resolve } from "node:path";
import { existsSync } from "node:fs";
import { open, rm, stat } from "node:fs/promises";
import { z } from "zod";
import { contentIdentity } from "./content-identity.ts";
import { FileHasher } from "./file-hasher.ts";
import { copyRoom } from "./download-rules.ts";
import { readRegistry, REGISTRY_FILE } from "./registry.ts";
import { TimedRecv, TimedSend } from "../mesh/read-deadline.ts";
import type { Stream } from "../mesh/transport.ts";
import { encodeFrame, readFrame, writeFrame } from "../mesh/wire.ts";
import {
  arrivalName,
  freeBytes,
  NotTheContent,
  TransferRefused,
  isArrivalNameOf,
  isSafeModelName,
  PartFile,
  SHA256_HEX,
  SizeRefused,
  throttledProgress,
  TransferError,
  type OnProgress,
} from "./model-transfer.ts";

const READ_BUFFER = 1024 * 1024;
/** What a sender reads from the file at a time. */
const SEND_CHUNK = 4 * 1024 * 1024;
/** What a sender writes at a time (each within the idle deadline). */
const SEND_SLICE = 256 * 1024;
const Name = z.string().min(1).max(1024);
const RequestSchema = z.discriminatedUnion("op", [
  z.object({ op: z.literal("manifest"), model: Name }),
  z.object({ op: z.literal("file"), model: Name, name: Name, offset: z.int().min(0) }),
]);
type ModelRequest = z.infer<typeof RequestSchema>;
const FileHead = z.object({ size: z.int().min(0), sha256: z.string().regex(SHA256_HEX) });
const Refusal = z.object({ error: z.string().max(4096) });
const Manifest = z.object({ files: z.array(FileHead.extend({ name: Name })).min(1).max(256) });
export type ManifestEntry = z.infer<typeof Manifest>["files"][number];

/** How long each side of a transfer waits for the other. */
export interface TransferDeadlines {
  /** For the request (one small frame), on the serving side. */
  requestMs: number;
  /** For the answer's first frame, when the sender has nothing to hash first. */
  answerMs: number;
  /** A sender hashes a file it has not hashed yet before it answers: the answer may take this long per byte more. */
  hashMsPerByte: number;
  /** For any answer, whatever the size (and for a manifest whose model's size is not known). */
  maxAnswerMs: number;
  /** Between bytes of a file. */
  idleMs: number;
}

export const TRANSFER_DEADLINES: TransferDeadlines = {
  requestMs: 30_000,
  answerMs: 30_000,
  // 50 MiB/s: a slow disk; a fast one hashes several times that.
  hashMsPerByte: 1_000 / (50 * 2 ** 20),
  maxAnswerMs: 15 * 60_000,
  idleMs: 30_000,
};

/** How long to wait for an answer that may need `bytes` hashed first (unknown: the longest wait). */
export function answerDeadlineMs(bytes: number | undefined, d: TransferDeadlines): number {
  if (bytes === undefined) return d.maxAnswerMs;
  return Math.min(d.maxAnswerMs, Math.round(d.answerMs + bytes * d.hashMsPerByte));
}

/** A model's files on the serving node (ModelInfo has this shape), or undefined when it has no such model. */
export type ModelLookup = (model: string) => { files: string[]; mmproj?: string | undefined } | undefined;

/** Name on arrival → path on this node, for every file of the model. */
export function filesToServe(model: string, found: { files: string[]; mmproj?: string | undefined }): Map<string, string> {
  const out = new Map<string, string>();
  const add = (name: string, path: string) => {
    if (out.has(name)) throw new TransferError(`model "${model}" has two files that would both arrive as ${name}`);
    out.set(name, path);
  };
  for (const file of found.files) add(arrivalName(model, basename(file), "model"), file);
  if (found.mmproj) add(arrivalName(model, basename(found.mmproj), "projector"), found.mmproj);
  return out;
}

/** Answers one request a peer sent on `stream`; never throws, whatever the peer sent. */
export async function serveModelStream(
  stream: Stream,
  lookup: ModelLookup,
  hasher: FileHasher,
  deadlines: Partial<Pick<TransferDeadlines, "requestMs" | "idleMs">> = {},
): Promise<void> {
  const { requestMs, idleMs } = { ...TRANSFER_DEADLINES, ...deadlines };
  const recv = new TimedRecv(stream.recv, requestMs, "the peer");
  // A peer that stops taking the file is given up on (its flow control would hold the send, and
  // the open file, for ever).
  const timed: Stream = { send: new TimedSend(stream.send, idleMs, "the peer"), recv: stream.recv };
  try {
    const refusal = await answer(timed, recv, requestMs, lookup, hasher);
    if (refusal === undefined) return;
    await writeFrame(timed.send, { error: refusal });
    await timed.send.finish();
    // Whatever else the peer meant to send is not wanted.
    await recv.stop(0).catch(() => undefined);
  } catch {
    // The peer went away or a file failed mid-send: the reset tells the receiver to keep its part.
    await stream.send.reset(1).catch(() => undefined);
    await recv.stop(1).catch(() => undefined);
  }
}

/** Serves the request, or returns why it is refused. */
async function answer(stream: Stream, recv: TimedRecv, requestMs: number, lookup: ModelLookup, hasher: FileHasher): Promise<string | undefined> {
  let request: ModelRequest;
  try {
    const parsed = RequestSchema.safeParse(await recv.within(requestMs, "its request", () => readFrame(recv)));
    if (!parsed.success) return `bad model request: expected {op: "manifest", model} or {op: "file", model, name, offset}`;
    request = parsed.data;
  } catch (err) {
    return `bad model request: ${(err as Error).message}`;
  }
  const { model } = request;
  const found = lookup(model);
  if (!found) return `model "${model}" is not on this node`;
  let files: Map<string, string>;
  try {
    files = filesToServe(model, found);
  } catch (err) {
    return (err as Error).message;
  }
  const digest = (name: string, path: string) =>
    hasher.digest(path).catch(() => {
      throw new TransferError(`file ${name} of model "${model}" cannot be read on the serving node`);
    });
  try {
    if (request.op === "manifest") {
      const entries: ManifestEntry[] = [];
      // One file after another: hashing shards in parallel would only make the disk seek.
      for (const [name, path] of files) entries.push({ name, ...(await digest(name, path)) });
      await writeFrame(stream.send, { files: entries });
      await stream.send.finish();
      return undefined;
    }
    const path = files.get(request.name);
    if (!path) return `model "${model}" has no file "${request.name}"; its files: ${[...files.keys()].join(", ")}`;
    await sendFile(stream, path, await digest(request.name, path), request.offset);
    return undefined;
  } catch (err) {
    if (err instanceof TransferError) return err.message;
    throw err;
  }
}

async function sendFile(stream: Stream, path: string, head: { size: number; sha256: string }, offset: number): Promise<void> {
  // An offset past the end gets the head alone: the receiver sees the size changed and starts over.
  const from = Math.min(offset, head.size);
  // The head goes out with the first piece of the file: each write through the binding has a cost.
  let pending: Uint8Array | undefined = encodeFrame(head);
  // Large reads, the next one under way while this one is sent: a file's stream comes in small
  // chunks, each a trip to the thread pool, and that (not the link) was what bounded a copy. One
  // handle for the whole send: one file throughout, whatever is renamed or removed meanwhile.
  const file = await open(path, "r");
  const readAt = (at: number) => {
    const buf = Buffer.allocUnsafe(Math.min(SEND_CHUNK, head.size - at));
    const read = file.read(buf, 0, buf.length, at).then(({ bytesRead }) => buf.subarray(0, bytesRead));
    // Awaited below; handled here too, or a failed read while a write waits would end the process.
    read.catch(() => undefined);
    return read;
  };
  let next = from < head.size ? readAt(from) : undefined;
  try {
    for (let at = from; next; ) {
      const chunk = await next;
      at += chunk.length;
      if (chunk.length === 0) throw new Error(`${path} ended before its ${head.size} bytes`);
      next = at < head.size ? readAt(at) : undefined;
      // In slices: the write deadline is for a peer that takes nothing, not for a slow link.
      const out = pending ? Buffer.concat([pending, chunk]) : chunk;
      pending = undefined;
      for (let i = 0; i < out.length; i += SEND_SLICE) await stream.send.writeAll(out.subarray(i, i + SEND_SLICE));
    }
    if (pending) await stream.send.writeAll(pending);
    await stream.send.finish();
  } finally {
    await next?.catch(() => undefined);
    await file.close();
  }
}

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
 * One file into its part, whole and no larger than `maxBytes` whatever the peer's head says once the
 * manifest is read; the caller installs it (with the SHA-256 it arrived with) and closes it.
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
