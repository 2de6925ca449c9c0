/**
 * One `llama-server` child serving one model: a small state machine (starting -> ready ->
 * draining -> stopping -> stopped, or failed when the process dies on its own), an in-flight
 * counter that eviction and idle unload respect, and the last-use time LRU eviction reads. A move
 * the machine does not allow is a bug in its caller and throws. The child's output
 * goes straight to a log file under the state dir; its exit is noticed at once, and aborts the
 * signal every in-flight request to it is tied to.
 */
import { dirname } from "node:path";
import { closeSync, openSync } from "node:fs";
import type { Subprocess } from "bun";
import type { ModelType } from "../models/model-type.ts";
import { childLaunch, readLogTail, terminate } from "./child-process.ts";
import type { DeviceMask } from "../models/recipe-devices.ts";
import { serverGone } from "./errors.ts";
import { DEFAULT_SLOTS, httpThreadsFor, SlotQueue, slotsFromArgv, slotsFromProps, type QueueObserver } from "./slot-queue.ts";
import { templateCapsFromProps, type TemplateCaps } from "./template-caps.ts";

/**
 * `draining`: being unloaded (an eviction, a reload, an unload): it finishes what it serves and
 * takes nothing new. A server told to drain while it starts still comes up, draining: the requests
 * that waited for its load are what it serves (the unload that drained it waits behind that load).
 */
export type ServerState = "starting" | "ready" | "draining" | "stopping" | "stopped" | "failed";
/** What a change told to listeners was: the server's state moved, or a request gave it back. */
export type ServerChange = "state" | "release";

const TRANSITIONS: Record<ServerState, readonly ServerState[]> = {
  starting: ["ready", "draining", "stopping", "failed"],
  ready: ["draining", "stopping", "failed"],
  draining: ["stopping", "failed"],
  stopping: ["stopped", "failed"],
  stopped: [],
  failed: [],
};

export const canTransition = (from: ServerState, to: ServerState): boolean => TRANSITIONS[from].includes(to);

/** A server in this state takes new requests. */
export const takesRequests = (state: ServerState): boolean => state === "ready";
/** A server in this state is loaded and serves (what it has, when draining): it holds its memory, it is listed. */
export const isLoaded = (state: ServerState): boolean => state === "ready" || state === "draining";

export class BadTransition extends Error {
  constructor(model: string, from: ServerState, to: ServerState) {
    super(`llama-server for ${model}: no move from ${from} to ${to}`);
  }
}

/** A log over this size is moved aside (one old copy kept) when its server starts again. */

export interface WrappedServerSpec {
  model: string;
  checkpoint: string;
  type: ModelType;
  devices: DeviceMask;
  recipe: string;
  pinned: boolean;
  argv: string[];
  port: number;
  /** Sent with every request to it: the key it answers to. */
  headers: Readonly<Record<string, string>>;
  logPath: string;
  env?: Record<string, string>;
  /** Requests that may wait for a slot (`--max-queue`); beyond them 429. */
  maxQueue: number;
  queueObserver?: QueueObserver;
  /** The RPC endpoints it is started with (`--rpc`, in its argv too). */
  rpcWorkers?: readonly string[];
  /** The context it runs with (`--ctx-size`, in its argv too; 0 = the model's own). */
  ctxSize?: number;
  /** The folder it saves its slots in (`--slot-save-path`, in its argv too), when it does (`slot-cache.ts`). */
  slotDir?: string;
  /** What is done with it once it answers and before it takes a request (its saved slots restored). */
  prepare?: (server: WrappedServer) => Promise<void>;
}

export class WrappedServer {
  readonly model: string;
  readonly checkpoint: string;
  readonly type: ModelType;
  readonly devices: DeviceMask;
  readonly recipe: string;
  readonly url: string;
  /** What every request to it carries (its key); never shown or sent anywhere else. */
  readonly headers: Readonly<Record<string, string>>;
  readonly logPath: string;
  /** Held loaded until it is unloaded by name: eviction passes it over (`pin` moves it). */
  private isPinned: boolean;
  /** A fence a request holds (`fence`), while it does. */
  private fenced: Promise<void> | undefined;
  /** Moved only by the server itself (its load, its exit) and by `drain` and `stop`. */
  private current: ServerState = "starting";
  /** The RPC endpoints it was started with (`--rpc`). */
  readonly rpcWorkers: readonly string[];
  /** The context it runs with (`--ctx-size`; 0 = the model's own). */
  readonly ctxSize: number;
  /** The folder it saves its slots in, when it does. */
  readonly slotDir: string | undefined;
  private readonly prepare: ((server: WrappedServer) => Promise<void>) | undefined;
  lastUse = Date.now();
  inflight = 0;
  /** Its slots and the requests waiting for one: slots from its argv until `/props` tells. */
  readonly queue: SlotQueue;
  /** What its chat template can do, once `/props` told (undefined: not told). */
  templateCaps: TemplateCaps | undefined;
  /** Set when the process ends; aborts every request in flight to it. */
  readonly gone: AbortSignal;
  readonly exited: Promise<number | null>;
  private readonly proc: Subprocess;
  private readonly goneController = new AbortController();
  private readonly listeners = new Set<(s: WrappedServer, why: ServerChange) => void>();

  constructor(spec: WrappedServerSpec) {
    this.model = spec.model;
    this.checkpoint = spec.checkpoint;
    this.type = spec.type;
    this.devices = spec.devices;
    this.recipe = spec.recipe;
    this.isPinned = spec.pinned;
    this.url = `http://127.0.0.1:${spec.port}`;
    this.headers = spec.headers;
    this.logPath = spec.logPath;
    this.slotDir = spec.slotDir;
    this.rpcWorkers = spec.rpcWorkers ?? [];
    this.ctxSize = spec.ctxSize ?? 0;
    this.prepare = spec.prepare;
    this.gone = this.goneController.signal;
    this.queue = new SlotQueue({ model: spec.model, slots: slotsFromArgv(spec.argv) ?? DEFAULT_SLOTS, maxQueue: spec.maxQueue, observer: spec.queueObserver });
    const launch = childLaunch(spec.argv);
    const fd = openSync(spec.logPath, "a");
    try {
      this.proc = Bun.spawn(launch.argv, {
        detached: launch.detached,
        stdin: "ignore",
        stdout: fd,
        stderr: fd,
        // Room for the requests sent ahead of a slot (`httpThreadsFor`), as an environment
        // variable: an operator's own (`--threads-http` in the args, or this variable) still wins.
        // Alike, ffmpeg is looked for in the binaries' own folder, which holds none: llama-server
        // hands any media its image decoder cannot read to ffprobe as a video, and a client's bytes
        // must not reach a program the operator never chose to run (one who does names its folder).
        env: {
          LLAMA_ARG_THREADS_HTTP: String(httpThreadsFor(this.queue.slots, navigator.hardwareConcurrency)),
          LLAMA_ARG_VIDEO_FFMPEG_DIR: dirname(spec.argv[0] ?? "."),
          ...process.env,
          GGML_NO_BACKTRACE: "1",
          ...spec.env,
        },
      });
    } finally {
      closeSync(fd);
    }
    this.exited = this.proc.exited.then(
      (code) => this.onExit(code),
      () => this.onExit(null),
    );
  }

  get pid(): number {
    return this.proc.pid;
  }

  get busy(): boolean {
    return this.inflight > 0;
  }

  get state(): ServerState {
    return this.current;
  }

  get pinned(): boolean {
    return this.isPinned;
  }

  /** An explicit load asked for it pinned, or not, again. */
  pin(on: boolean): void {
    this.isPinned = on;
  }

  private setState(to: ServerState): void {
    if (!canTransition(this.current, to)) throw new BadTransition(this.model, this.current, to);
    this.current = to;
    for (const l of this.listeners) l(this, "state");
  }

  /**
   * Keeps every other request out of llama-server until `until` settles (`pastFence`): a member's
   * cache restored into one of its slots for one request must not be read for another's prompt, and
   * llama-server gives an idle slot to the prompt it shares most with. One at a time: a second
   * waits for the first. Resolves once it is up, with what a request passes it by (`held`).
   */
  async fence(until: Promise<void>): Promise<{ held: Promise<void> }> {
    while (this.fenced) await this.fenced;
    const held: Promise<void> = until
      .catch(() => undefined)
      .finally(() => {
        if (this.fenced === held) this.fenced = undefined;
      });
    this.fenced = held;
    return { held };
  }

  /** Once no request but the one holding `own` (if any) holds the fence; rejects when `signal` aborts first. */
  async pastFence(own: Promise<void> | undefined, signal: AbortSignal): Promise<void> {
    while (this.fenced && this.fenced !== own) {
      signal.throwIfAborted();
      const aborted = new Promise<never>((_, reject) => signal.addEventListener("abort", () => reject(signal.reason), { once: true }));
      aborted.catch(() => undefined);
      await Promise.race([this.fenced, aborted]);
    }
  }

  /** Takes it out of routing: it finishes what it serves and takes nothing new (an eviction, a reload or an unload stops it after). */
  drain(): void {
    if (this.current === "starting" || this.current === "ready") this.setState("draining");
  }

  private onExit(code: number | null): number | null {
    this.setState(this.current === "stopping" ? "stopped" : "failed");
    const why = `llama-server for ${this.model} exited (${code ?? this.proc.signalCode})`;
    this.goneController.abort(new Error(why));
    this.queue.close(serverGone(`${why} while the request waited for a slot; retry to reload it`));
    return code;
  }

  /** Called on every state change (ready, failed, stopped), and on every request's release. */
  onChange(listener: (s: WrappedServer, why: ServerChange) => void): void {
    this.listeners.add(listener);
  }

  touch(): void {
    this.lastUse = Date.now();
  }

  acquire(): void {
    this.inflight++;
    this.touch();
  }

  release(): void {
    this.inflight = Math.max(0, this.inflight - 1);
    this.touch();
    for (const l of this.listeners) l(this, "release");
  }

  /**
   * Resolves when /health answers 200. "Connection refused" and 503 "Loading model" are normal
   * while it starts; the process exiting or the deadline passing is a failure with the log's tail.
   */
  async waitReady(deadlineMs: number): Promise<void> {
    const deadline = Date.now() + deadlineMs;
    // Drained while it starts, it still comes up (and serves only what waited for its load).
    while (this.current === "starting" || this.current === "draining") {
      try {
        const res = await fetch(`${this.url}/health`, { headers: this.headers, signal: AbortSignal.any([AbortSignal.timeout(2000), this.gone]) });
        await res.body?.cancel();
        if (res.status === 200) {
          await this.readProps();
          await this.prepare?.(this);
          this.touch();
          if (this.current === "starting") this.setState("ready");
          // Told to stop while it prepared: it never serves.
          if (!isLoaded(this.current)) break;
          return;
        }
      } catch {
        // not listening yet
      }
      if (this.gone.aborted) break;
      if (Date.now() > deadline) {
        await this.stop();
        throw new Error(`llama-server for ${this.model} was not ready within ${Math.round(deadlineMs / 1000)} s\n${readLogTail(this.logPath)}`);
      }
      await Promise.race([Bun.sleep(25), this.exited]);
    }
    await this.exited;
    throw new Error(`llama-server for ${this.model} exited while loading (code ${this.proc.exitCode ?? this.proc.signalCode})\n${readLogTail(this.logPath)}`);
  }

  /**
   * The slots the server really has (`/props` `total_slots`; its argv's guess stays when it does not
   * say) and what its chat template can do.
   */
  private async readProps(): Promise<void> {
    try {
      const res = await fetch(`${this.url}/props`, { headers: this.headers, signal: AbortSignal.any([AbortSignal.timeout(2000), this.gone]) });
      const props: unknown = res.ok ? await res.json() : (await res.body?.cancel(), undefined);
      const slots = slotsFromProps(props);
      if (slots !== undefined) this.queue.setSlots(slots);
      this.templateCaps = templateCapsFromProps(props);
    } catch {
      // An older or busy server: the argv's number serves.
    }
  }

  /** SIGTERM, then SIGKILL after `graceMs`; resolves once the process is gone. */
  async stop(graceMs = 5000): Promise<void> {
    if (this.current === "stopped" || this.current === "failed") return;
    if (this.current !== "stopping") this.setState("stopping");
    await terminate(this.proc, graceMs);
    await this.exited;
  }
}
