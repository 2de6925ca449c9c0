/**
 * Gets the files of a model this node was assigned and does not have. From a peer that has them
 * (over the mesh, verified and resumable) whenever one does; when none does, one member of the
 * model's group (the catalog's `puller`) downloads it from its reference or source and the others
 * wait, looking again on every change to the catalog, then copy it from that member: the mesh
 * downloads a model once. One fetch at a time; failures are retried with a growing pause (a
 * partial file is resumed), progress is logged and announced (announced progress is also what
 * keeps the puller's job while it pulls).
 *
 * What this node's operator named (its registry's source or reference, `--model REF`) may be any
 * http(s) URL or Hugging Face reference. What only a peer announced is data from another machine:
 * a Hugging Face reference is pulled from this node's own Hub endpoint (`fromPeer`), and a URL, as
 * a reference or a source, is held to the peer rule (https, public addresses, pinned) and capped
 * in size by what the mesh announced and the free space here; one the rule refuses is given up at once.
 *
 * A peer copy of a model this node could download itself is weighed against that download, and
 * the faster taken (`copy-or-download.ts`).
 */
import { mkdirSync } from "node:fs";
import { basename, relative } from "node:path";
import type { CatalogModel } from "../placement/catalog.ts";
import type { Log } from "../base/log.ts";
import { PEER_SOURCE_RULE, peerSizeLimit, withoutCredentials } from "../models/download-rules.ts";
import type { HubConfig } from "../models/hf-hub.ts";
import { modelRefOf } from "../models/model-ref.ts";
import { FileHasher } from "../models/file-hasher.ts";
import { DiskFull, NotTheContent, sleep, TransferError, TransferRefused } from "../models/model-transfer.ts";
import { fetchModelFromPeer } from "../models/peer-fetch.ts";
import { PullError, type PullErrorCode } from "../models/pull-error.ts";
import { pullModel } from "../models/pull.ts";
import { freeBytes } from "../models/model-transfer.ts";
import { writeRegistryEntry } from "../models/registry.ts";
import { COPY_RATE_WINDOW, type RateWindow } from "../models/transfer-rate.ts";
import { downloadFromUrl } from "../models/url-download.ts";
import { progressReporter } from "../base/progress.ts";
import { CopyOrDownload, type Report } from "./copy-or-download.ts";
import { downloadPlan, fetchedFrom, fetchPlan, type DownloadPlan, type FetchPlan, type OwnOrigin } from "./fetch-plan.ts";
import type { PathStream } from "./peer-streams.ts";
import { shortId } from "../base/short-id.ts";

const MAX_PAUSE_MS = 30_000;
/** Failures no retry can fix (a hash that never matches, a refusal) before the node gives up on the model. */
const GIVE_UP_AFTER = 3;
/** How long a holder whose copy failed (other files than the model's content, a refusal) is not asked again (a glitch is not for ever). */
const MISLED_PAUSE_MS = 120_000;
/** A wait for the puller looks again at least this often, should a change go unheard. */
const RECHECK_MS = 30_000;
/** What a pull says the same way every time: trying again cannot help. */
const FINAL_PULL_ERRORS = new Set<PullErrorCode>(["bad_reference", "not_found", "gated", "quant_not_found", "no_space", "name_taken"]);

export interface FetchProgress {
  model: string;
  bytes: number;
  total: number;
  /** A peer's node id, or the reference or source URL. */
  from: string;
}


/**
 * Files copied from a peer or a URL arrive under the model's name (`arrivalName`), which the models-dir
 * scan alone would read by the file (`org/repo:Q8_0` arriving as `org/repo:Q8_0.gguf` would be
 * `repo:Q8_0`): models.json says which model they are, that mesh fetched them (so `mesh rm` may
 * remove them), and the Hub reference the mesh knows it by. A URL a peer announced is not written down: models.json is the
 * operator's word, and that URL would then be fetched without the peer rule.
 */
async function recordCopy(modelsDir: string, model: string, files: readonly string[], ref: string | undefined): Promise<void> {
  const hubRef = ref !== undefined && modelRefOf(ref)?.kind === "hf" ? ref : undefined;
  const projector = `mmproj-${basename(model)}.gguf`;
  const first = files.find((f) => basename(f) !== projector);
  const mmproj = files.find((f) => basename(f) === projector);
  if (first === undefined) return;
  const rel = (p: string) => relative(modelsDir, p);
  await writeRegistryEntry(modelsDir, model, { file: rel(first), ...(mmproj ? { mmproj: rel(mmproj) } : {}), ...(hubRef ? { ref: hubRef } : {}), pulled: true });
}

export interface ModelFetcherOptions {
  enabled: boolean;
  modelsDir: string;
  selfId: () => string | undefined;
  /** A MODEL stream to a peer and the path it took, or undefined when the peer is not connected. */
  openStream: (peerId: string) => Promise<PathStream | undefined>;
  /** The source URL this node's own registry gives the model: the operator's word, trusted as such. */
  ownSource: (model: string) => string | undefined;
  /** The reference this node's operator named the model by (`--model REF`, its registry): trusted as such. */
  ownRef: (model: string) => string | undefined;
  /** This node's own Hugging Face endpoint and token: every Hub reference, a peer's too, is pulled from there. */
  hub: HubConfig;
  /** Started to join a mesh and has heard from no member yet (for a while at most): it pulls nothing. */
  joining: () => boolean;
  log: Log;
  /** Progress moved (announce it). */
  onProgress: () => void;
  /** The files are in place (rescan the models dir, announce, decide again). */
  onDone: (model: string) => Promise<void>;
  /** How a copy over the mesh connection, and the download tried instead, are measured (COPY_RATE_WINDOW). */
  rateWindow?: RateWindow;
  /** Where the SHA-256s of the models' files are kept across restarts (the state dir): none, this process only. */
  hashCache?: string;
}

interface Attempt {
  model: string;
  plan: FetchPlan;
  entry: () => CatalogModel | undefined;
  /** Holders that offered other files than the model's content in this fetch, and until when they are not asked again. */
  misled: ReadonlyMap<string, number>;
  abort: AbortController;
}

export class ModelFetcher {
  progress: FetchProgress | undefined;
  readonly hasher: FileHasher;
  private abort: AbortController | undefined;
  private attempt: Attempt | undefined;
  private wake: (() => void) | undefined;
  /** An assigned model's copy from a peer, weighed against downloading it. */
  private readonly copies: CopyOrDownload;

  constructor(private readonly o: ModelFetcherOptions) {
    this.hasher = new FileHasher(o.hashCache);
    this.copies = new CopyOrDownload({
      modelsDir: o.modelsDir,
      hub: o.hub,
      openStream: o.openStream,
      hasher: this.hasher,
      log: o.log,
      rateWindow: o.rateWindow ?? COPY_RATE_WINDOW,
      download: (model, plan, m, signal, report) => this.download(model, plan, m, signal, report),
      recordCopy: (model, files, ref) => recordCopy(o.modelsDir, model, files, ref),
      size: () => this.progress?.total ?? 0,
    });
  }

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
    this.copies.reset();
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

  /**
   * The catalog changed: a fetch waiting for the puller looks again, and a download this node
   * started stops when the model is no longer its to pull (a peer has it now, or another member
   * that was pulling it too keeps the job).
   */
  changed(): void {
    this.wake?.();
    const a = this.attempt;
    if (!a || a.plan.kind === "peer" || a.abort.signal.aborted) return;
    const now = this.plan(a.model, a.entry, 0, a.misled);
    if (now.kind === "peer" || now.kind === "wait") a.abort.abort();
  }

  private own(model: string): OwnOrigin {
    return { ref: this.o.ownRef(model), source: this.o.ownSource(model) };
  }

  /** The plan for this try; `misled`: holders whose files were not the model's content, and until when they are not asked again. */
  private plan(model: string, entry: () => CatalogModel | undefined, attempt: number, misled: ReadonlyMap<string, number>): FetchPlan {
    const now = Date.now();
    const avoid = new Set([...misled].filter(([, until]) => until > now).map(([id]) => id));
    return fetchPlan(entry(), this.o.selfId(), this.own(model), attempt, this.o.joining(), avoid);
  }

  private async run(model: string, entry: () => CatalogModel | undefined, signal: AbortSignal, giveUp: (why: string) => void): Promise<void> {
    const started = performance.now();
    let lasting = 0;
    let waitingFor: string | undefined;
    const misled = new Map<string, number>();
    for (let failures = 0; !signal.aborted; ) {
      const plan = this.plan(model, entry, failures, misled);
      if (plan.kind === "wait") {
        // No longer fetching: the claim to pull it goes with the announced progress.
        if (this.progress) {
          this.progress = undefined;
          this.o.onProgress();
        }
        if (waitingFor !== plan.why) this.o.log.info("waiting for the model", { model, why: plan.why });
        waitingFor = plan.why;
        await this.nextChange(signal);
        continue;
      }
      waitingFor = undefined;
      const attempt: Attempt = { model, plan, entry, misled, abort: new AbortController() };
      const stop = () => attempt.abort.abort();
      signal.addEventListener("abort", stop, { once: true });
      this.attempt = attempt;
      try {
        await this.get(model, plan, entry(), failures, attempt.abort.signal);
        this.o.log.info("model fetched", { model, ms: Math.round(performance.now() - started) });
        await this.o.onDone(model);
        return;
      } catch (err) {
        if (signal.aborted) return;
        // The job went elsewhere (a peer has the files now, another member pulls): decide again at once.
        if (attempt.abort.signal.aborted) {
          this.o.log.info("no longer this node's to download; the model comes from the mesh", { model });
          continue;
        }
        // A refusal by rule (a source a peer may not name, a file in the way), or a full disk, says the same next time.
        // A pull wraps what its download met (a file that is no GGUF, a 404): judged by that, so a
        // peer's reference to such a file is given up, not downloaded again for as long as the node runs.
        const met = err instanceof PullError && err.cause instanceof TransferError ? err.cause : err;
        // A member that failed its copy (other files than the model's content, bytes that are not
        // its list's, a refusal, a stall) is not asked again for a while, and is no reason to give
        // the model up: it comes from another holder. What this node refuses by its own rule (a file
        // in the way) or its full disk stays its own lasting failure.
        if (plan.kind === "peer" && met instanceof TransferError && !(met instanceof TransferRefused) && !(met instanceof DiskFull)) {
          misled.set(plan.peer, Date.now() + MISLED_PAUSE_MS);
          this.o.log.warn(met instanceof NotTheContent ? "a member offered other files than the model's content; not copying from it for now" : "a member's copy failed; not copying from it for now", { model, peer: shortId(plan.peer), error: met.message });
          continue;
        }
        const final = met instanceof TransferRefused || met instanceof DiskFull || (err instanceof PullError && FINAL_PULL_ERRORS.has(err.code));
        const lastingError = met instanceof TransferError || (err instanceof PullError && err.code === "hash_mismatch");
        if (final || (lastingError && ++lasting >= GIVE_UP_AFTER)) return giveUp((err as Error).message);
        const pause = Math.min(MAX_PAUSE_MS, 1_000 * 2 ** failures++);
        this.o.log[lastingError ? "error" : "warn"]("could not fetch the model; trying again", { model, error: (err as Error).message, retryInMs: pause });
        await sleep(pause, signal).catch(() => undefined);
      } finally {
        signal.removeEventListener("abort", stop);
        if (this.attempt === attempt) this.attempt = undefined;
      }
    }
  }

  /**
   * Copies `model`'s files from `peer` outside the one fetch of an assigned model (a replica's
   * copy: it neither replaces that fetch nor claims a pull), verified and resumable as any peer copy.
   * It stays with the peer, over whichever path, and is not weighed against the hub as an assigned
   * model's copy is: the replica keeper chose that peer and times the copy itself, and a replica is
   * extra capacity, not the one copy a node needs to serve its model.
   */
  async copyFromPeer(model: string, peer: string, entry: CatalogModel | undefined, signal: AbortSignal): Promise<void> {
    mkdirSync(this.o.modelsDir, { recursive: true });
    const open = async () => {
      const opened = await this.o.openStream(peer);
      if (!opened) throw new Error(`node ${shortId(peer)} is not connected`);
      return opened.stream;
    };
    const files = await fetchModelFromPeer({ model, open, destDir: this.o.modelsDir, signal, hasher: this.hasher, expectedBytes: entry?.sizeBytes, identity: entry?.identity });
    await recordCopy(this.o.modelsDir, model, files, entry?.ref);
  }

  /** One try by `plan`. */
  private async get(model: string, plan: Exclude<FetchPlan, { kind: "wait" }>, m: CatalogModel | undefined, failures: number, signal: AbortSignal): Promise<void> {
    mkdirSync(this.o.modelsDir, { recursive: true });
    const from = fetchedFrom(plan);
    this.o.log.info("fetching model", { model, from: plan.kind === "peer" ? `node ${shortId(plan.peer)}` : from, attempt: failures + 1 });
    // Log lines, not a bar: the node's own log shares the terminal.
    const lines = progressReporter(`fetching ${model}`, this.o.log, false);
    const reporter =
      (from: string): Report =>
      (bytes, total) => {
        if (signal.aborted) return;
        this.progress = { model, bytes, total, from };
        this.o.onProgress();
        lines.update(bytes, total);
      };
    // Said before the first byte: announced progress is the puller's claim, so a member joining now waits.
    if (!this.progress || this.progress.model !== model) reporter(from)(0, m?.sizeBytes ?? 0);
    if (plan.kind !== "peer") await this.download(model, plan, m, signal, reporter(from));
    else await this.copies.get(model, plan.peer, downloadPlan(m, this.own(model)), m, signal, reporter);
    lines.done();
  }

  /** Downloads the model by `plan`; what a peer announced is fetched under the peer rules. */
  private async download(model: string, plan: DownloadPlan, m: CatalogModel | undefined, signal: AbortSignal, report: Report): Promise<void> {
    if (plan.kind === "pull") {
      const got = await pullModel({
        ref: plan.ref,
        name: model,
        modelsDir: this.o.modelsDir,
        hub: this.o.hub,
        onProgress: (p) => report(p.allBytes, p.allTotal),
        signal,
        log: this.o.log,
        fromPeer: plan.fromPeer,
      });
      if (got.alreadyHad) this.o.log.info("the model was already pulled here", { model, path: got.path });
      return;
    }
    const peerRules = plan.fromPeer ? { rule: PEER_SOURCE_RULE, limit: peerSizeLimit(m?.sizeBytes ?? 0, await freeBytes(this.o.modelsDir)) } : {};
    const got = await downloadFromUrl({ url: plan.url, model, destDir: this.o.modelsDir, onProgress: (p) => report(p.bytes, p.total), signal, ...peerRules });
    if (!got.verified) this.o.log.warn("the source gave no hash to check the download against", { model, url: plan.url });
    await recordCopy(this.o.modelsDir, model, [got.path], undefined);
  }

  /** Resolves on the next change to the catalog (`changed`), on abort, or after RECHECK_MS. */
  private nextChange(signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener("abort", done);
        if (this.wake === done) this.wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, RECHECK_MS);
      signal.addEventListener("abort", done, { once: true });
      this.wake = done;
    });
  }
}
