/**
 * What the console's event stream carries, gathered once for every page open on this node: the
 * state (worked out every half second while a page listens, sent when what it shows changed, and
 * every few seconds for the figures that move by themselves: round trips, uptimes), a traffic
 * sample every two seconds (the last ten minutes kept, so a page opened now has history), and log
 * lines as they are written. Each page gets them in order; one that stops reading is let go.
 */
import { CONSOLE_LIMITS, type ConsoleEvents, type ConsoleHello, type ConsoleState, type TrafficSample } from "../../console/protocol.ts";
import type { NodeMetrics } from "../../metrics/node-metrics.ts";
import type { ConsoleSources } from "../../node/console-source.ts";

export type ConsoleSend = <K extends keyof ConsoleEvents>(event: K, data: ConsoleEvents[K]) => void;

const STATE_CHECK_MS = 500;
/** Pages listening at once: each holds a subscription and up to `MAX_UNREAD_BYTES` of queue. */
export const MAX_CONSOLE_PAGES = 32;
/** A state is sent at least this often while a page listens, for the figures left out of `stateKey`. */
const STATE_REFRESH_MS = 5_000;

/** The state without what moves on its own (pure): two states with the same key show the same mesh. */
export function stateKey(s: ConsoleState): string {
  return JSON.stringify({
    ...s,
    at: 0,
    nodes: s.nodes.map((n) => ({ ...n, lastSeenMsAgo: 0, uptimeS: 0, rttMs: 0, tunnelBytes: null })),
    models: s.models.map((m) => ({ ...m, loadingForS: 0, fetch: m.fetch ? { ...m.fetch, bytes: 0 } : undefined, failure: m.failure ? { ...m.failure, retryInS: 0 } : undefined })),
  });
}

/** Whether a state must go out now (pure): it changed, or the last one is old. */
export function stateDue(key: string, last: { key: string; at: number } | undefined, now: number): boolean {
  return last === undefined || last.key !== key || now - last.at >= STATE_REFRESH_MS;
}

export class ConsoleFeed {
  private readonly history: TrafficSample[] = [];
  private readonly pages = new Set<ConsoleSend>();
  private last: { key: string; at: number } | undefined;
  private stateTimer: Timer | undefined;
  private checking = false;
  /** The last failure said, by what failed ("state", "traffic sample"). */
  private readonly lastFailure = new Map<string, string>();

  constructor(
    private readonly sources: ConsoleSources,
    private readonly metrics: Pick<NodeMetrics, "traffic">,
  ) {
    // Sampled whether or not a page is open: a page opened later shows the minutes before it.
    const sample = () => void this.sample().catch((err: unknown) => this.failed("traffic sample", err));
    setInterval(sample, CONSOLE_LIMITS.trafficEveryMs).unref();
    sample();
  }

  /** The state now, with the peers' paths asked first (a page's first look should not say "none"). */
  async state(): Promise<ConsoleState> {
    await this.sources.refresh();
    return this.sources.state();
  }

  /** Everything a page opened now shows. */
  async hello(): Promise<ConsoleHello> {
    return { state: await this.state(), traffic: [...this.history], logs: this.sources.logs.recent() };
  }

  /** Whether one more page may listen. */
  get full(): boolean {
    return this.pages.size >= MAX_CONSOLE_PAGES;
  }

  /** Sends every event to `send` from now on, until the returned function is called. */
  subscribe(send: ConsoleSend): () => void {
    this.pages.add(send);
    // A change sent to the other pages while this one's hello was being made: sent again to all.
    this.last = undefined;
    const unlog = this.sources.logs.subscribe((line) => send("log", line));
    this.stateTimer ??= setInterval(() => void this.checkState().catch((err: unknown) => this.failed("state", err)), STATE_CHECK_MS);
    return () => {
      unlog();
      this.pages.delete(send);
      if (this.pages.size === 0 && this.stateTimer) {
        clearInterval(this.stateTimer);
        this.stateTimer = undefined;
      }
    };
  }

  /** What the console shows must never take the node down; a failure is said once until it changes (it recurs every tick). */
  private failed(what: string, err: unknown): void {
    const error = err instanceof Error ? err.message : String(err);
    if (this.lastFailure.get(what) === error) return;
    this.lastFailure.set(what, error);
    this.sources.log.warn(`the console's ${what} failed`, { error });
  }

  private async checkState(): Promise<void> {
    if (this.checking) return;
    this.checking = true;
    try {
      const state = await this.state();
      const key = stateKey(state);
      if (!stateDue(key, this.last, state.at)) return;
      this.last = { key, at: state.at };
      for (const send of this.pages) send("state", state);
    } finally {
      this.checking = false;
    }
  }

  private async sample(): Promise<void> {
    const { models, forwarded, kv } = await this.metrics.traffic();
    const tunnels = this.sources.tunnelBytes();
    const peers: TrafficSample["peers"] = {};
    for (const id of new Set([...forwarded.keys(), ...tunnels.keys()])) {
      const t = tunnels.get(id);
      peers[id] = { forwarded: forwarded.get(id) ?? 0, tunnelIn: t?.in ?? 0, tunnelOut: t?.out ?? 0 };
    }
    const sample: TrafficSample = { at: Date.now(), models, peers, ...(kv ? { kv } : {}) };
    this.history.push(sample);
    if (this.history.length > CONSOLE_LIMITS.trafficSamples) this.history.splice(0, this.history.length - CONSOLE_LIMITS.trafficSamples);
    for (const send of this.pages) send("traffic", sample);
  }
}
