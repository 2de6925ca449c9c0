/**
 * Copies an assigned model from a peer, and weighs that copy against downloading the model when
 * this node could download it itself. A copy over the mesh connection (no direct path between the
 * two nodes: its bytes go through the iroh binding, ~15 MB/s on 1.x) is measured, and the
 * download, from the same place and under the same rules as the fetcher's own (`model-fetcher.ts`),
 * is taken instead when it is faster (`copy-source.ts`): the peer copy stops (its part is resumed
 * should a pull fail or turn out slower; a download by URL, which would write the same part, starts
 * it afresh), and the choice holds for the rest of the fetch
 * unless its source fails. Rates measured stay for later fetches: by peer over the mesh
 * connection, by host for downloads.
 */
import { rm } from "node:fs/promises";
import { join } from "node:path";
import type { CatalogModel } from "../placement/catalog.ts";
import type { Stream } from "../streams/stream.ts";
import type { Log } from "../base/log.ts";
import { withoutCredentials } from "../models/download-rules.ts";
import type { HubConfig } from "../models/hf-hub.ts";
import { modelRefOf } from "../models/model-ref.ts";
import type { FileHasher } from "../models/file-hasher.ts";
import { PartFile } from "../models/model-transfer.ts";
import { fetchModelFromPeer } from "../models/peer-fetch.ts";
import type { ManifestEntry } from "../models/peer-transfer.ts";
import { PULLS_DIR } from "../models/registry.ts";
import { MeasuredRates, RateMeter, type RateWindow } from "../models/transfer-rate.ts";
import { copySource, formatRate, type CopySource } from "./copy-source.ts";
import { fetchedFrom, type DownloadPlan } from "./fetch-plan.ts";
import type { PathStream, StreamPath } from "./peer-streams.ts";
import { shortId } from "../base/short-id.ts";

/** Progress of one source of a try: bytes of the model here, and its size (0 while not known). */
export type Report = (bytes: number, total: number) => void;

export interface CopyOrDownloadOptions {
  modelsDir: string;
  /** This node's own Hugging Face endpoint: the host a Hub reference is downloaded from. */
  hub: HubConfig;
  /** A MODEL stream to a peer and the path it took, or undefined when the peer is not connected. */
  openStream: (peerId: string) => Promise<PathStream | undefined>;
  hasher: FileHasher;
  log: Log;
  /** How a copy over the mesh connection, and the download tried instead, are measured. */
  rateWindow: RateWindow;
  /** Downloads the model by `plan` (the fetcher's own download, under its rules). */
  download: (model: string, plan: DownloadPlan, m: CatalogModel | undefined, signal: AbortSignal, report: Report) => Promise<void>;
  /** Writes down the files a peer copy brought (models.json). */
  recordCopy: (model: string, files: readonly string[], ref: string | undefined) => Promise<void>;
  /** The model's size as the fetch's progress last said it (0 while not known). */
  size: () => number;
}

/** A transfer under way, measured as it goes. */
interface Running<T> {
  /** Settles when the transfer ends; rejects when it fails or is stopped. */
  done: Promise<T>;
  meter: RateMeter;
  /** Stops it (its part stays for a resume) and resolves once it has let go of its files. */
  stop: () => Promise<void>;
}

/** A copy from a peer under way. */
interface RunningCopy extends Running<string[]> {
  peer: string;
  began: number;
  /** Resolves once its first stream is open (its path known). */
  opened: Promise<void>;
  /** The path its latest stream took; undefined before the first. */
  path: () => StreamPath | undefined;
  /** The files the peer listed, once it has. */
  files: () => readonly ManifestEntry[];
}

export class CopyOrDownload {
  /** Where this fetch takes its model from, once decided; kept until that source fails. */
  private readonly sourceOf = new Map<string, "peer" | "hub">();
  /** Models whose download this fetch started while a peer had them. */
  private readonly hubTried = new Set<string>();
  /** Rates over the mesh connection, by peer. */
  private readonly meshRates = new MeasuredRates();
  /** Rates of downloads, by host. */
  private readonly hubRates = new MeasuredRates();

  constructor(private readonly o: CopyOrDownloadOptions) {}

  /** A new fetch begins: what the last one chose and tried no longer holds (measured rates do). */
  reset(): void {
    this.sourceOf.clear();
    this.hubTried.clear();
  }

  /**
   * Copies `model` from `peer`; weighed against downloading it by `hub` when this node could
   * (`copyOrDownload`). `reporter` gives the progress report of a source, by what it is fetched from.
   */
  async get(model: string, peer: string, hub: DownloadPlan | undefined, m: CatalogModel | undefined, signal: AbortSignal, reporter: (from: string) => Report): Promise<void> {
    const copy = this.startCopy(model, peer, m, signal, reporter(peer));
    await (hub ? this.copyOrDownload(model, copy, hub, m, signal, reporter) : this.finishCopy(model, copy, m));
  }

  /** Starts copying the model from `peer`, measuring the bytes its streams bring. */
  private startCopy(model: string, peer: string, m: CatalogModel | undefined, signal: AbortSignal, report: Report): RunningCopy {
    const meter = new RateMeter(this.o.rateWindow);
    const stopper = new AbortController();
    let path: StreamPath | undefined;
    let files: readonly ManifestEntry[] = [];
    const opened = Promise.withResolvers<void>();
    const open = async () => {
      const got = await this.o.openStream(peer);
      if (!got) throw new Error(`node ${shortId(peer)} is not connected`);
      // What one path moved says nothing of the other.
      if (path !== undefined && got.path !== path) meter.restart();
      path = got.path;
      opened.resolve();
      return counted(got.stream, (n) => meter.add(n));
    };
    const done = fetchModelFromPeer({
      model,
      open,
      destDir: this.o.modelsDir,
      onProgress: (p) => report(p.bytes, p.total),
      signal: AbortSignal.any([signal, stopper.signal]),
      hasher: this.o.hasher,
      // The size tells how long the peer may take to hash the file before it answers.
      expectedBytes: m?.sizeBytes,
      identity: m?.identity,
      onManifest: (listed) => (files = listed),
    });
    // Its end is awaited by whoever finishes or stops it: a stop's rejection is not an unhandled one.
    done.catch(() => undefined);
    const stop = async () => {
      stopper.abort();
      meter.stop();
      await done.catch(() => undefined);
    };
    return { peer, began: performance.now(), done, meter, stop, opened: opened.promise, path: () => path, files: () => files };
  }

  /** Waits for a peer copy to end and records it: the model's entry, and the rate over the mesh connection. */
  private async finishCopy(model: string, copy: RunningCopy, m: CatalogModel | undefined): Promise<void> {
    let files: string[];
    try {
      files = await copy.done;
    } catch (err) {
      // A peer that failed is no choice to keep: the next try weighs the sources again.
      if (this.sourceOf.get(model) === "peer") this.sourceOf.delete(model);
      throw err;
    } finally {
      copy.meter.stop();
    }
    const rate = copy.path() === "mesh" ? copy.meter.final() : undefined;
    if (rate !== undefined) this.meshRates.set(copy.peer, rate);
    await this.o.recordCopy(model, files, m?.ref);
    // A pull this fetch tried and stopped left its part in the pulls' staging, keyed by the file's
    // SHA-256 (the manifest's schema holds it to 64 hex digits: a peer names no other path). The
    // copy has finished, so every file's bytes here hashed to that SHA-256: the staging removed is
    // of content verified here, not of what a peer merely claimed.
    if (this.hubTried.has(model)) for (const f of copy.files()) await rm(join(this.o.modelsDir, PULLS_DIR, f.sha256), { recursive: true, force: true }).catch(() => undefined);
    // The model's size, whether all of it crossed or some was here already.
    this.o.log.info("model copied from a peer", { model, peer: shortId(copy.peer), size: this.o.size(), ms: Math.round(performance.now() - copy.began) });
  }

  /**
   * A peer copy of a model this node could download itself (`hub`): weighed (`weigh`), it goes on,
   * or gives way to the download (measured for a window of its own first when its speed is not
   * known), as `copySource` says; a download that fails or turns out slower gives way back.
   */
  private async copyOrDownload(model: string, copy: RunningCopy, hub: DownloadPlan, m: CatalogModel | undefined, signal: AbortSignal, reporter: (from: string) => Report): Promise<void> {
    const peer = copy.peer;
    const host = hostOf(hub, this.o.hub);
    const again = () => this.finishCopy(model, this.startCopy(model, peer, m, signal, reporter(peer)), m);
    // The hub failed earlier in this fetch, or the copy ends before it is weighed.
    const weighed = this.sourceOf.get(model) === "peer" ? undefined : await this.weigh(copy, host);
    if (!weighed) return this.finishCopy(model, copy, m);
    const { next, path, meshRate } = weighed;
    const rates = (hubRate: number | undefined) => ({ model, peer, hub, meshRate, hubRate });
    if (next === "peer") {
      if (path === "mesh") this.decide("peer", rates(this.hubRates.get(host)));
      return this.finishCopy(model, copy, m);
    }
    await copy.stop();
    // A copy that finished as it was stopped is the model: nothing to download.
    if (await copy.done.then(() => true, () => false)) return this.finishCopy(model, copy, m);
    // A download by URL writes the part a copy left (`.partial/<name>.part`) and would go on from the
    // peer's unchecked bytes where its server names no hash: it starts from nothing instead. A pull
    // stages its files apart, so the copy's part stays for a resume.
    if (hub.kind === "url") for (const f of copy.files()) await discardPart(this.o.modelsDir, f.name);
    this.hubTried.add(model);
    const download = this.startDownload(model, hub, m, signal, reporter(fetchedFrom(hub)));
    if (next === "hub") this.decide("hub", rates(this.hubRates.get(host)));
    else {
      const where = sourceName(hub, this.o.hub);
      this.o.log.info(`trying ${where} for ${model}: ${formatRate(meshRate)} over the mesh connection from node ${shortId(peer)}; ${where} not measured yet`, { model, from: fetchedFrom(hub) });
      if (!(await endsFirst(download, download.meter.full))) {
        const hubRate = await download.meter.full;
        this.hubRates.set(host, hubRate);
        if (copySource({ path, hasHub: true, meshRate, hubRate }) === "peer") {
          this.decide("peer", rates(hubRate));
          await download.stop();
          return again();
        }
        this.decide("hub", rates(hubRate));
      }
    }
    if (await this.finishDownload(model, hub, peer, download, signal, copy.files())) {
      // Done within its measuring window: the choice is said now, with the rate the whole download had.
      if (!this.sourceOf.has(model)) this.decide("hub", rates(this.hubRates.get(host)));
      return;
    }
    return again();
  }

  /**
   * What `copySource` says of a running copy: as soon as its path is known, by the rates measured
   * before (this peer over the mesh connection, the hub's host) when they say the hub; else once
   * this copy's own window is full. Undefined when the copy ends first.
   */
  private async weigh(copy: RunningCopy, host: string): Promise<{ next: CopySource; path: StreamPath; meshRate: number } | undefined> {
    if (await endsFirst(copy, copy.opened)) return undefined;
    const earlier = this.meshRates.get(copy.peer);
    const opened = copy.path() ?? "direct";
    if (earlier !== undefined && copySource({ path: opened, hasHub: true, meshRate: earlier, hubRate: this.hubRates.get(host) }) === "hub") {
      return { next: "hub", path: opened, meshRate: earlier };
    }
    if (await endsFirst(copy, copy.meter.full)) return undefined;
    const meshRate = await copy.meter.full;
    // Bytes have come, so a path is known; were it not, "direct" leaves the copy alone.
    const path = copy.path() ?? "direct";
    if (path === "mesh") this.meshRates.set(copy.peer, meshRate);
    return { next: copySource({ path, hasHub: true, meshRate, hubRate: this.hubRates.get(host) }), path, meshRate };
  }

  /** Starts downloading the model by `plan`, measured from its start: a source slow to send its first byte is slow. */
  private startDownload(model: string, plan: DownloadPlan, m: CatalogModel | undefined, signal: AbortSignal, report: Report): Running<void> {
    const meter = new RateMeter(this.o.rateWindow);
    meter.begin();
    const stopper = new AbortController();
    const measured: Report = (bytes, total) => {
      meter.progressTo(bytes);
      report(bytes, total);
    };
    const done = this.o.download(model, plan, m, AbortSignal.any([signal, stopper.signal]), measured);
    done.catch(() => undefined);
    const stop = async () => {
      stopper.abort();
      meter.stop();
      await done.catch(() => undefined);
    };
    return { done, meter, stop };
  }

  /**
   * Waits for a download that stands in for a peer copy: true once the model is in place (the
   * copy's part is then litter), false when it failed (the peer is this fetch's source from now on).
   */
  private async finishDownload(model: string, hub: DownloadPlan, peer: string, download: Running<void>, signal: AbortSignal, copied: readonly ManifestEntry[]): Promise<boolean> {
    try {
      await download.done;
    } catch (err) {
      if (signal.aborted) throw err;
      this.sourceOf.set(model, "peer");
      this.o.log.warn(`could not download ${model} from ${sourceName(hub, this.o.hub)}; copying it from node ${shortId(peer)} instead`, { model, error: (err as Error).message });
      return false;
    } finally {
      download.meter.stop();
    }
    const rate = download.meter.final();
    if (rate !== undefined) this.hubRates.set(hostOf(hub, this.o.hub), rate);
    for (const f of copied) await discardPart(this.o.modelsDir, f.name);
    return true;
  }

  /** Takes `source` for the rest of this fetch and says why, with both rates. */
  private decide(source: "peer" | "hub", r: { model: string; peer: string; hub: DownloadPlan; meshRate: number; hubRate: number | undefined }): void {
    this.sourceOf.set(r.model, source);
    const where = sourceName(r.hub, this.o.hub);
    const node = `node ${shortId(r.peer)}`;
    const hubRate = r.hubRate === undefined ? "done before it could be measured" : formatRate(r.hubRate);
    const meshRate = formatRate(r.meshRate);
    const line =
      source === "hub"
        ? `copying ${r.model} from ${where}: ${hubRate} there against ${meshRate} over the mesh connection from ${node}`
        : `copying ${r.model} from ${node}: ${meshRate} over the mesh connection against ${hubRate} from ${where}`;
    this.o.log.info(line, { model: r.model, from: fetchedFrom(r.hub) });
  }
}

/** Whether the transfer ends (done or failed) before `other` settles. */
function endsFirst(t: Running<unknown>, other: Promise<unknown>): Promise<boolean> {
  const ended = t.done.then(
    () => true,
    () => true,
  );
  return Promise.race([ended, other.then(() => false)]);
}

/** `stream`, telling `add` of every byte read from it. */
function counted(stream: Stream, add: (n: number) => void): Stream {
  const { recv } = stream;
  return {
    send: stream.send,
    recv: {
      read: async (buf) => {
        const n = await recv.read(buf);
        if (n) add(n);
        return n;
      },
      readExact: async (buf) => {
        await recv.readExact(buf);
        add(buf.length);
      },
      stop: (code) => recv.stop(code),
    },
  };
}

/** The host a download's bytes come from: its rate is that host's. */
function hostOf(plan: DownloadPlan, hub: HubConfig): string {
  const ref = plan.kind === "pull" ? modelRefOf(plan.ref) : undefined;
  const target = plan.kind === "url" ? plan.url : ref?.kind === "url" ? ref.url : hub.endpoint;
  try {
    return new URL(target).host;
  } catch {
    return withoutCredentials(target);
  }
}

/** A download's source as a log line names it: "the hub" for a Hugging Face reference, else the host. */
function sourceName(plan: DownloadPlan, hub: HubConfig): string {
  return plan.kind === "pull" && modelRefOf(plan.ref)?.kind === "hf" ? "the hub" : hostOf(plan, hub);
}

/** Removes what a stopped copy left of file `name` (nothing when it is in use or gone). */
async function discardPart(dir: string, name: string): Promise<void> {
  const part = await PartFile.open(dir, name).catch(() => undefined);
  if (!part) return;
  try {
    await part.discard();
  } finally {
    await part.close();
  }
}
