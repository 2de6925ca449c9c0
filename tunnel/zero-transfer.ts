/**
 * Zero-transfer loading on a worker: when the host asks the worker's `rpc-server` for a tensor by
 * hash (SET_TENSOR_HASH) and this node holds the same GGUF, the tensor's bytes are read from the
 * local file, checked against the hash, and written where `rpc-server -c` looks
 * (`<cache dir>/<hash as 16 hex digits>`) before the request is forwarded, so the server answers
 * "have it" and the weights never cross the network. Any mismatch just leaves the normal path.
 */
import { gguf } from "@huggingface/gguf";
import { existsSync, mkdirSync, readdirSync, renameSync, statSync, unlinkSync } from "node:fs";
import { join } from "node:path";
import type { Log } from "../base/log.ts";
import { tensorByteSize } from "../models/ggml-types.ts";
import { fnv1a64, hashFileName, readSetTensorHash } from "./rpc-protocol.ts";

interface TensorLocation {
  path: string;
  offset: number;
  bytes: number;
  /** Its FNV-1a hash once worked out (undefined: unreadable), for as long as this version of the file is indexed. */
  hash?: Promise<bigint | undefined>;
}

export interface ZeroTransferStats {
  /** Tensors placed from a local file. */
  hits: number;
  /** Bytes that did not have to cross the network. */
  bytesSaved: number;
  /** Hash requests for which no local copy matched. */
  misses: number;
  /** Bytes of local tensors read and hashed to answer them: each tensor once per version of its file. */
  bytesHashed: number;
}

export interface ZeroTransferOptions {
  cacheDir: string;
  /** GGUF files on this node (its models). */
  files: () => readonly string[];
  /** Bound on the cache dir; the oldest files go first. */
  maxCacheBytes: number;
  log: Log;
}

/** Files to delete, oldest first, until the rest fit in `maxBytes` (pure). */
export function cacheVictims(files: readonly { name: string; size: number; mtimeMs: number }[], maxBytes: number): string[] {
  let total = files.reduce((s, f) => s + f.size, 0);
  const out: string[] = [];
  for (const f of [...files].sort((a, b) => a.mtimeMs - b.mtimeMs)) {
    if (total <= maxBytes) break;
    out.push(f.name);
    total -= f.size;
  }
  return out;
}

export class ZeroTransfer {
  readonly stats: ZeroTransferStats = { hits: 0, bytesSaved: 0, misses: 0, bytesHashed: 0 };
  /** Each file's tensors, indexed once per version of the file (requests at once share one index). */
  private readonly indexed = new Map<string, { key: string; tensors: Promise<Map<string, TensorLocation>> }>();

  constructor(private readonly opts: ZeroTransferOptions) {
    mkdirSync(opts.cacheDir, { recursive: true });
    this.prune();
    // rpc-server adds files of its own (every tensor sent with the cache flag): check now and then.
    setInterval(() => this.prune(), 60_000).unref();
  }

  private tensorsOf(path: string): Promise<Map<string, TensorLocation>> {
    let key: string;
    try {
      const st = statSync(path);
      key = `${st.size}:${st.mtimeMs}`;
    } catch {
      return Promise.resolve(new Map());
    }
    const hit = this.indexed.get(path);
    if (hit?.key === key) return hit.tensors;
    const tensors = gguf(path, { allowLocalFile: true }).then(
      ({ tensorInfos, tensorDataOffset }) => {
        const out = new Map<string, TensorLocation>();
        for (const t of tensorInfos) {
          const bytes = tensorByteSize(t.dtype, t.shape);
          if (bytes !== undefined) out.set(t.name, { path, offset: Number(tensorDataOffset + t.offset), bytes });
        }
        return out;
      },
      // not a readable GGUF: nothing to offer from it
      () => new Map<string, TensorLocation>(),
    );
    this.indexed.set(path, { key, tensors });
    return tensors;
  }

  private readonly inFlight = new Map<bigint, Promise<void>>();
  private tempCounter = 0;

  /** The SET_TENSOR_HASH hook: place the tensor in the cache if a local file has it. */
  readonly onSetTensorHash = async (payload: Uint8Array): Promise<void> => {
    const req = readSetTensorHash(payload);
    const target = join(this.opts.cacheDir, hashFileName(req.hash));
    if (existsSync(target) || req.offset !== 0n) return;
    // Two hosts loading the same tensor at once share one placement.
    const running = this.inFlight.get(req.hash);
    if (running) return running;
    const placing = this.place(req.tensor.name, req.hash, target).finally(() => this.inFlight.delete(req.hash));
    this.inFlight.set(req.hash, placing);
    return placing;
  };

  /**
   * The tensor's hash, read and worked out once: a peer that names the same large tensor again and
   * again (with hashes that never match) costs a lookup each time, not a read and a hash. The call
   * that read it gets the bytes too.
   */
  private async check(loc: TensorLocation): Promise<{ hash: bigint | undefined; data?: Uint8Array }> {
    if (loc.hash) return { hash: await loc.hash };
    const reading = this.read(loc);
    loc.hash = reading.then(
      (data) => {
        this.stats.bytesHashed += data.length;
        return data.length === loc.bytes ? fnv1a64(data) : undefined;
      },
      // A read that failed (a file busy, a disk hiccup) is tried again by the next request.
      () => (loc.hash = undefined),
    );
    return { hash: await loc.hash, data: await reading.catch(() => undefined) };
  }

  private async read(loc: TensorLocation): Promise<Uint8Array> {
    return new Uint8Array(await Bun.file(loc.path).slice(loc.offset, loc.offset + loc.bytes).arrayBuffer());
  }

  private async place(name: string, hash: bigint, target: string): Promise<void> {
    try {
      for (const path of this.opts.files()) {
        const loc = (await this.tensorsOf(path)).get(name);
        if (!loc) continue;
        const checked = await this.check(loc);
        if (checked.hash !== hash) continue;
        // Hashed by an earlier request: read it again, and check it again (the file may have changed).
        const data = checked.data ?? (await this.read(loc));
        if (!checked.data && (data.length !== loc.bytes || fnv1a64(data) !== hash)) continue;
        const partial = `${target}.partial-${process.pid}-${this.tempCounter++}`;
        await Bun.write(partial, data);
        renameSync(partial, target);
        this.stats.hits++;
        this.stats.bytesSaved += data.length;
        this.schedulePrune();
        return;
      }
    } catch (err) {
      // A file gone mid-read or a full disk: the host just sends the bytes.
      this.opts.log.warn("zero-transfer could not place a tensor", { tensor: name, error: (err as Error).message });
    }
    this.stats.misses++;
  }

  private pruneTimer: Timer | undefined;
  private schedulePrune(): void {
    this.pruneTimer ??= setTimeout(() => {
      this.pruneTimer = undefined;
      this.prune();
    }, 5_000);
  }

  /** Keeps the cache dir within its bound. */
  prune(): void {
    try {
      const files = readdirSync(this.opts.cacheDir).flatMap((name) => {
        try {
          const st = statSync(join(this.opts.cacheDir, name));
          return st.isFile() ? [{ name, size: st.size, mtimeMs: st.mtimeMs }] : [];
        } catch {
          return [];
        }
      });
      for (const name of cacheVictims(files, this.opts.maxCacheBytes)) unlinkSync(join(this.opts.cacheDir, name));
    } catch (err) {
      this.opts.log.warn("could not prune the rpc cache", { dir: this.opts.cacheDir, error: (err as Error).message });
    }
  }
}
