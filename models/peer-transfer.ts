/**
 * A model's files from the node that has them to one that lacks them, over mesh streams of kind
 * MODEL, one request per stream, as one frame: `{op: "manifest", model}` is answered with
 * `{files: [{name, size, sha256}]}`; `{op: "file", model, name, offset}` with a head
 * `{size, sha256}` and then the file's bytes from `offset` to its end. A refusal is `{error}`.
 * The server (here) looks a name up in the asked model's own list of files: nothing a peer sends
 * is ever used as a path. The receiver (`peer-fetch.ts`) resumes a cut file from its part and
 * installs it only when the whole file's SHA-256 matches. Each side waits for the other only so
 * long (`TransferDeadlines`): a peer that never answers, or stops sending mid-file, is given up on
 * and another one tried.
 */
import { basename } from "node:path";
import { open } from "node:fs/promises";
import { z } from "zod";
import type { FileHasher } from "./file-hasher.ts";
import { TimedRecv, TimedSend } from "../streams/read-deadline.ts";
import type { Stream } from "../streams/stream.ts";
import { encodeFrame, readFrame, writeFrame } from "../streams/wire.ts";
import { arrivalName, SHA256_HEX, TransferError } from "./model-transfer.ts";

/** What a sender reads from the file at a time. */
const SEND_CHUNK = 4 * 1024 * 1024;
/** What a sender writes at a time (each within the idle deadline). */
const SEND_SLICE = 256 * 1024;
const Name = z.string().min(1).max(1024);
const RequestSchema = z.discriminatedUnion("op", [
  z.object({ op: z.literal("manifest"), model: Name }),
  z.object({ op: z.literal("file"), model: Name, name: Name, offset: z.int().min(0) }),
]);
export type ModelRequest = z.infer<typeof RequestSchema>;
export const FileHead = z.object({ size: z.int().min(0), sha256: z.string().regex(SHA256_HEX) });
export const Refusal = z.object({ error: z.string().max(4096) });
export const Manifest = z.object({ files: z.array(FileHead.extend({ name: Name })).min(1).max(256) });
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
