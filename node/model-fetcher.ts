/**
 * Gets the files of a model this node was assigned and does not have: from a peer that has them
 * (over the mesh, verified and resumable), else from the model's source URL. One fetch at a time;
 * failures are retried with a growing pause (a partial file is resumed), progress is logged and
 * announced so every node's status shows it.
 *
 * The source this node's own registry gives (the operator's) may be any http(s) URL. One that only
 * a peer announced is held to the peer rule (https, public addresses, pinned) and capped in size
 * by what the mesh announced and the free space here; a source the rule refuses is given up at once.
 */
import { mkdirSync } from "node:fs";
import { statfs } from "node:fs/promises";
import type { CatalogModel } from "../mesh/catalog.ts";
import type { Stream } from "../mesh/transport.ts";
import type { Log } from "../log.ts";
import { PEER_SOURCE_RULE, peerSizeLimit } from "../models/download-rules.ts";
import { FileHasher, sleep, TransferError, TransferRefused, type TransferProgress } from "../models/model-transfer.ts";
import { fetchModelFromPeer } from "../models/peer-transfer.ts";
import { downloadFromUrl } from "../models/url-download.ts";
import { progressReporter } from "../progress.ts";

const MAX_PAUSE_MS = 30_000;
/** Failures no retry can fix (a hash that never matches, a refusal) before the node gives up on the model. */
const GIVE_UP_AFTER = 3;

async function freeBytes(dir: string): Promise<number> {
  const fs = await statfs(dir);
  return fs.bavail * fs.bsize;
}

export interface FetchProgress {
  model: string;
  bytes: number;
  total: number;
  /** A peer's node id, or the source URL. */
  from: string;
}

export interface ModelFetcherOptions {
  enabled: boolean;
  modelsDir: string;
  selfId: () => string | undefined;
  /** A MODEL stream to a peer, or undefined when it is not connected. */
  openStream: (peerId: string) => Promise<Stream | undefined>;
  /** The source URL this node's own registry gives the model: the operator's word, trusted as such. */
  ownSource: (model: string) => string | undefined;
  log: Log;
  /** Progress moved (announce it). */
  onProgress: () => void;
  /** The files are in place (rescan the models dir, announce, decide again). */
  onDone: (model: string) => Promise<void>;
}

export class ModelFetcher {
  progress: FetchProgress | undefined;
  readonly hasher = new FileHasher();
  private abort: AbortController | undefined;

  constructor(private readonly o: ModelFetcherOptions) {}

  get enabled(): boolean {
    return this.o.enabled;
  }

  /**
   * Starts fetching `model` (replacing any fetch under way); `entry` reads the catalog afresh per
   * try. `giveUp` hears of failures that trying again cannot fix, after a few of them.
   */
  fetch(model: string, entry: () => CatalogModel | undefined, giveUp: (why: string) => void): void {
    if (!this.o.enabled) return;
    this.cancel();
    const abort = new AbortController();
    this.abort = abort;
    void this.run(model, entry, abort.signal, giveUp).finally(() => {
      if (this.abort === abort) {
        this.abort = undefined;
        this.progress = undefined;
        this.o.onProgress();
      }
    });
  }

  cancel(): void {
    this.abort?.abort();
    this.abort = undefined;
    this.progress = undefined;
  }

  private async run(model: string, entry: () => CatalogModel | undefined, signal: AbortSignal, giveUp: (why: string) => void): Promise<void> {
    const started = performance.now();
    let lasting = 0;
    for (let attempt = 0; !signal.aborted; attempt++) {
      const m = entry();
      const self = this.o.selfId();
      const peer = m?.nodesOnDisk.filter((id) => id !== self)[attempt % Math.max(1, m.nodesOnDisk.length)];
      const own = this.o.ownSource(model);
      const from = peer ?? own ?? m?.source;
      try {
        if (!from) throw new Error("no peer has it and it has no source URL");
        mkdirSync(this.o.modelsDir, { recursive: true });
        this.o.log.info("fetching model", { model, from: peer ? `node ${peer.slice(0, 10)}` : from, attempt: attempt + 1 });
        // Log lines, not a bar: the node's own log shares the terminal.
        const lines = progressReporter(`fetching ${model}`, this.o.log, false);
        const onProgress = (p: TransferProgress) => {
          if (signal.aborted) return;
          this.progress = { model, bytes: p.bytes, total: p.total, from };
          this.o.onProgress();
          lines.update(p.bytes, p.total);
        };
        if (peer) {
          const open = async () => {
            const stream = await this.o.openStream(peer);
            if (!stream) throw new Error(`node ${peer.slice(0, 10)} is not connected`);
            return stream;
          };
          // The size tells how long the peer may take to hash the file before it answers.
          await fetchModelFromPeer({ model, open, destDir: this.o.modelsDir, onProgress, signal, hasher: this.hasher, expectedBytes: m?.sizeBytes });
        } else {
          const peerRules = own === undefined ? { rule: PEER_SOURCE_RULE, limit: peerSizeLimit(m?.sizeBytes ?? 0, await freeBytes(this.o.modelsDir)) } : {};
          const got = await downloadFromUrl({ url: from, model, destDir: this.o.modelsDir, onProgress, signal, ...peerRules });
          if (!got.verified) this.o.log.warn("the source gave no hash to check the download against", { model, url: from });
        }
        lines.done();
        this.o.log.info("model fetched", { model, ms: Math.round(performance.now() - started) });
        await this.o.onDone(model);
        return;
      } catch (err) {
        if (signal.aborted) return;
        // A refusal by rule (a source a peer may not name, a file in the way) says the same next time.
        if (err instanceof TransferRefused || (err instanceof TransferError && ++lasting >= GIVE_UP_AFTER)) return giveUp((err as Error).message);
        const pause = Math.min(MAX_PAUSE_MS, 1_000 * 2 ** attempt);
        const level = err instanceof TransferError ? "error" : "warn";
        this.o.log[level]("could not fetch the model; trying again", { model, error: (err as Error).message, retryInMs: pause });
        await sleep(pause, signal).catch(() => undefined);
      }
    }
  }
}
