/**
 * The phases of one mesh of bench/scale.ts, in order, each setting its measures by key: the mesh
 * forms (paced spawns, then every node agrees), rests (CPU, memory and traffic, nothing polled), takes
 * a new joiner, sees its model change, loses a tenth of its members to kill -9 while every survivor
 * chats, and gets them back. A wait that misses its deadline sets "not within" and the run goes on.
 */
import { post } from "../harness/api.ts";
import { meshReady, type MeshTestNode } from "../harness/mesh.ts";
import { SMALL_LLAMA, startNode, type StartNodeOptions, type TestNode } from "../harness/node.ts";
import { processTree } from "../harness/processes.ts";
import { waitFor } from "../harness/wait.ts";
import { rssMiB } from "./rss.ts";
import { agreementSeen, chatOnce, controlRate, cpuSeconds, hostsOf, listsExactly, loopbackBytes, oneDigest, partsBetween, readViews, threadTimes, type NodeView, type ThreadPart } from "./scale-probe.ts";
import { step } from "./watchdog.ts";
import { describeStreamEnd, startStream, type StreamEnd } from "../harness/stream-end.ts";

/** Every measure, in the summary's order: its section, its row and its goal at 50 nodes. */
export const MEASURES = [
  { key: "spawn", section: "formation", label: "joiners spawned, first -> last spawn", goal: "" },
  { key: "endpoints", section: "formation", label: "last spawn -> every endpoint up", goal: "" },
  { key: "formation", section: "formation", label: "last spawn -> all peers seen, one catalog", goal: "<= 15 s" },
  { key: "formationDrops", section: "formation", label: "formation: live members dropped (peer left) / dials that failed, all nodes", goal: "" },
  { key: "digest", section: "formation", label: "catalog digest read from", goal: "" },
  { key: "served", section: "formation", label: "last spawn -> every node sees the model served", goal: "" },
  { key: "cpu", section: "idle", label: "CPU per node, avg / max (% of a core)", goal: "<= 1 %" },
  { key: "cpuSum", section: "idle", label: "CPU of all nodes (% of a core)", goal: "" },
  { key: "cpuParts", section: "idle", label: "CPU per node by thread: event loop / iroh (tokio) / rest (% of a core)", goal: "" },
  { key: "wakes", section: "idle", label: "wake-ups per node per second: event loop / iroh (tokio) / rest (its threads that lived through the rest)", goal: "" },
  { key: "cpuChildren", section: "idle", label: "CPU of their llama-server and rpc-server children (% of a core)", goal: "" },
  { key: "rss", section: "idle", label: "RSS per node, avg / max (MiB)", goal: "<= 100 MiB" },
  { key: "controlIdle", section: "traffic", label: "idle: control stream per node (sent B/s, msg/s)", goal: "at most linear in N" },
  { key: "controlIdlePeer", section: "traffic", label: "idle: control stream per node per peer (sent B/s)", goal: "flat as N grows" },
  { key: "loIdle", section: "traffic", label: "idle: all loopback bytes per node (B/s)", goal: "" },
  { key: "controlChanging", section: "traffic", label: "model changing: control stream per node (sent B/s, msg/s)", goal: "" },
  { key: "loChanging", section: "traffic", label: "model changing: all loopback bytes per node (B/s)", goal: "" },
  { key: "changesFailed", section: "traffic", label: "model changing: loads/unloads refused", goal: "" },
  { key: "servedAgain", section: "traffic", label: "window end -> every node sees the model served again", goal: "" },
  { key: "joinerRoutable", section: "joiner", label: "new joiner: spawn -> a chat through it answers", goal: "" },
  { key: "joinerSeen", section: "joiner", label: "new joiner: spawn -> every node lists it", goal: "" },
  { key: "joinerGone", section: "joiner", label: "new joiner: SIGTERM -> gone from every view", goal: "" },
  { key: "killed", section: "churn", label: "churn: nodes killed (kill -9)", goal: "10 %" },
  { key: "churnAgreed", section: "churn", label: "churn: kill -> survivors agree (peers, catalog, one host)", goal: "<= 10 s" },
  { key: "churnChats", section: "churn", label: "churn: chats answered / failed", goal: "0 failed" },
  { key: "churnHosts", section: "churn", label: "churn: samples with hosts of the model != 1", goal: "0" },
  { key: "restarted", section: "churn", label: "restart (same state dirs): spawn -> all N listed again", goal: "" },
  { key: "sameIds", section: "churn", label: "restarted nodes came back with their ids", goal: "" },
  { key: "hostKilledNear", section: "host killed", label: "host killed mid-answer: streams through entries that watch it, by how they ended", goal: "<= 10 s, an error" },
  { key: "hostKilledFar", section: "host killed", label: "host killed mid-answer: streams through entries that do not", goal: "<= 10 s, an error" },
] as const;
export type MeasureKey = (typeof MEASURES)[number]["key"];

export interface Settings {
  binary: string;
  model: string;
  modelFile: string;
  batch: number;
  deadlineMs: number;
  restMs: number;
  /** Chats each survivor sends at most during the churn phase. */
  chatsPerNode: number;
}

const POLL_MS = 500;
const CHAT_TIMEOUT_MS = 30_000;
/** Loads and unloads of the founder's model in the changing window, one every CHANGE_EVERY_MS (even: it ends loaded). */
const CHANGES = 4;
const CHANGE_EVERY_MS = 2_000;
/** How long the churn phase goes on after the survivors agree. */
const CHURN_TAIL_MS = 5_000;
/** Entries with a stream in flight when the host dies. */
const HOST_KILL_ENTRIES = 8;

type Views = (NodeView | undefined)[];

/** One mesh: its nodes, and every node started for it (to stop at the end, the killed ones too). */
export class ScaleRun {
  readonly out = new Map<MeasureKey, string>();
  readonly started: TestNode[] = [];
  founder!: MeshTestNode;
  joiners: MeshTestNode[] = [];
  private joinArgs: string[] = [];

  constructor(
    private readonly s: Settings,
    readonly n: number,
  ) {}

  private get nodes(): MeshTestNode[] {
    return [this.founder, ...this.joiners];
  }

  private async start(args: string[], opts: StartNodeOptions): Promise<MeshTestNode> {
    const node = await startNode(args, { command: [this.s.binary], ...opts });
    this.started.push(node);
    return meshReady(node);
  }

  /** ms from `since` until `probe` holds, or undefined when the deadline passes first. */
  private async until(since: number, what: string, probe: () => Promise<boolean>): Promise<number | undefined> {
    try {
      await waitFor(probe, { what, timeoutMs: this.s.deadlineMs, intervalMs: POLL_MS });
      return performance.now() - since;
    } catch (err) {
      console.error(`[bench] ${(err as Error).message.split("\n")[0]}`);
      return undefined;
    }
  }

  private seconds(ms: number | undefined, seen = ""): string {
    return ms === undefined ? `not within ${this.s.deadlineMs / 1000} s${seen ? ` (${seen})` : ""}` : `${(ms / 1000).toFixed(2)} s`;
  }

  /** Every node but the founder sees the founder host the model. */
  private servedSeen(views: Views): boolean {
    return views.every((v, i) => i === 0 || v?.peers.some((p) => p.nodeId === this.founder.nodeId && p.hosts.includes(this.s.model)));
  }

  async form(): Promise<void> {
    const { s, n } = this;
    step(`N=${n}: starting the founder`);
    this.founder = await this.start([...SMALL_LLAMA, "--model", s.model], { models: { [`${s.model}.gguf`]: s.modelFile }, name: "founder" });
    this.joinArgs = [...SMALL_LLAMA, "--join", this.founder.token, "--fetch", "off"];
    let first = 0;
    let last = 0;
    for (let i = 1; i < n; i += s.batch) {
      const size = Math.min(s.batch, n - i);
      step(`N=${n}: spawning nodes ${i}-${i + size - 1}`);
      // startNode spawns before its first await: the time of the call is the time of the spawn.
      last = performance.now();
      if (i === 1) first = last;
      this.joiners.push(...(await Promise.all(Array.from({ length: size }, (_, k) => this.start(this.joinArgs, { name: `node-${i + k}` })))));
    }
    this.out.set("spawn", this.seconds(last - first));
    this.out.set("endpoints", this.seconds(performance.now() - last));
    step(`N=${n}: waiting for every node to agree`);
    const ids = this.nodes.map((x) => x.nodeId);
    let views: Views = [];
    const formed = await this.until(last, `${n} nodes to agree`, async () => {
      views = await readViews(this.nodes);
      return listsExactly(views, ids) && oneDigest(views);
    });
    this.out.set("formation", this.seconds(formed, agreementSeen(views, n - 1)));
    // No node stopped while the mesh formed: every member dropped was alive, and every failed dial was to a live one.
    const lines = this.nodes.flatMap((x) => x.child.output().split("\n"));
    this.out.set("formationDrops", `${lines.filter((l) => l.includes("peer left")).length} / ${lines.filter((l) => l.includes("could not reach a member")).length}`);
    this.out.set("digest", views.every((v) => v?.digestOwn) ? "catalogDigest" : views.some((v) => v?.digestOwn) ? "mixed" : "/v1/models (ids, hosts)");
    this.out.set("served", this.seconds(await this.until(last, "every node to see the model served", async () => this.servedSeen(await readViews(this.nodes)))));
  }

  /** A rest window with nothing polled: CPU from /proc at its ends, control counters read just outside it. */
  async rest(): Promise<void> {
    step(`N=${this.n}: resting ${this.s.restMs / 1000} s`);
    const nodes = this.nodes;
    const pids = nodes.map((x) => x.child.proc.pid);
    const children = pids.flatMap((p) => [...processTree(p)].filter((c) => c !== p));
    const before = await readViews(nodes);
    const [cpu0, kids0, parts0, lo0, t0] = [pids.map(cpuSeconds), children.map(cpuSeconds), pids.map(threadTimes), loopbackBytes(), performance.now()];
    await Bun.sleep(this.s.restMs);
    const [cpu1, kids1, parts1, lo1, t1] = [pids.map(cpuSeconds), children.map(cpuSeconds), pids.map(threadTimes), loopbackBytes(), performance.now()];
    const rss = pids.flatMap((p) => rssMiB(p) ?? []);
    const after = await readViews(nodes);
    const secs = (t1 - t0) / 1000;
    const pct = (a: (number | undefined)[], b: (number | undefined)[]) => a.flatMap((x, i) => (x === undefined || b[i] === undefined ? [] : [((b[i]! - x) / secs) * 100]));
    const cpu = pct(cpu0, cpu1);
    this.out.set("cpu", `${avg(cpu).toFixed(2)} / ${Math.max(...cpu).toFixed(2)}`);
    this.out.set("cpuSum", sum(cpu).toFixed(1));
    const between = parts1.map((m, i) => partsBetween(parts0[i]!, m, cpu0[i] === undefined || cpu1[i] === undefined ? undefined : cpu1[i]! - cpu0[i]!));
    const part = (p: ThreadPart, of: "cpu" | "wakes") => sum(between.map((b) => b[p][of])) / secs / pids.length;
    const parts: ThreadPart[] = ["loop", "iroh", "rest"];
    this.out.set("cpuParts", parts.map((p) => (part(p, "cpu") * 100).toFixed(2)).join(" / "));
    this.out.set("wakes", parts.map((p) => part(p, "wakes").toFixed(1)).join(" / "));
    this.out.set("cpuChildren", `${sum(pct(kids0, kids1)).toFixed(1)} (${children.length} processes)`);
    this.out.set("rss", `${avg(rss).toFixed(0)} / ${Math.max(...rss).toFixed(0)}`);
    const control = controlRate(before, after, secs);
    this.out.set("controlIdle", control ? `${control.sentBps.toFixed(0)} B/s, ${control.messagesPs.toFixed(2)} msg/s` : "-");
    this.out.set("controlIdlePeer", control ? (control.sentBps / Math.max(1, this.n - 1)).toFixed(1) : "-");
    const lo = (lo1 - lo0) / secs / this.n;
    this.out.set("loIdle", `${lo.toFixed(0)} (${(lo / Math.max(1, this.n - 1)).toFixed(0)} per peer)`);
  }

  /** One more node joins: until a chat through it is answered, and until every node lists it; then it leaves. */
  async newJoiner(): Promise<void> {
    step(`N=${this.n}: a new joiner`);
    const others = this.nodes;
    const t0 = performance.now();
    const node = await this.start(this.joinArgs, { name: "new-joiner" });
    const [routable, seen] = await Promise.all([
      this.until(t0, "a chat through the new node", () => chatOnce(node, this.s.model, CHAT_TIMEOUT_MS)),
      this.until(t0, "every node to list the new one", async () => (await readViews(others)).every((v) => v?.peers.some((p) => p.nodeId === node.nodeId))),
    ]);
    this.out.set("joinerRoutable", this.seconds(routable));
    this.out.set("joinerSeen", this.seconds(seen));
    const t1 = performance.now();
    await node.stop();
    const gone = await this.until(t1, "the new node to leave every view", async () => (await readViews(others)).every((v) => v !== undefined && !v.peers.some((p) => p.nodeId === node.nodeId)));
    this.out.set("joinerGone", this.seconds(gone));
  }

  /** The founder unloads and loads its model CHANGES times in a window; control bytes over that window. */
  async modelChanges(): Promise<void> {
    step(`N=${this.n}: the model changing`);
    const nodes = this.nodes;
    const before = await readViews(nodes);
    const [lo0, t0] = [loopbackBytes(), performance.now()];
    let refused = 0;
    for (let i = 0; i < CHANGES; i++) {
      await Bun.sleep(Math.max(0, t0 + i * CHANGE_EVERY_MS - performance.now()));
      const res = await post(this.founder, i % 2 === 0 ? "/api/v1/unload" : "/api/v1/load", { model_name: this.s.model }).catch(() => undefined);
      await res?.arrayBuffer();
      if (res?.status !== 200) refused++;
    }
    await Bun.sleep(Math.max(0, t0 + CHANGES * CHANGE_EVERY_MS - performance.now()));
    const [lo1, t1] = [loopbackBytes(), performance.now()];
    const after = await readViews(nodes);
    const secs = (t1 - t0) / 1000;
    const control = controlRate(before, after, secs);
    this.out.set("controlChanging", control ? `${control.sentBps.toFixed(0)} B/s, ${control.messagesPs.toFixed(2)} msg/s` : "-");
    this.out.set("loChanging", `${((lo1 - lo0) / secs / this.n).toFixed(0)} (${CHANGES} changes in ${secs.toFixed(1)} s)`);
    this.out.set("changesFailed", `${refused} of ${CHANGES}`);
    this.out.set("servedAgain", this.seconds(await this.until(t1, "every node to see the model served again", async () => this.servedSeen(await readViews(nodes)))));
  }

  /**
   * kill -9 a tenth of the joiners (at least one) while every survivor chats, one chat at a time:
   * until the survivors list exactly each other, agree on the catalog and see one host of the model,
   * sampling the hosts all along and CHURN_TAIL_MS after. Then the killed come back as themselves.
   */
  async churn(): Promise<void> {
    const k = Math.max(1, Math.round((this.n - 1) / 10));
    const victims = this.joiners.slice(-k);
    const survivors = [this.founder, ...this.joiners.slice(0, -k)];
    const ids = survivors.map((x) => x.nodeId);
    this.out.set("killed", `${k} of ${this.n - 1} joiners`);
    step(`N=${this.n}: killing ${k} node(s)`);
    let stop = false;
    let [answered, failed, samples, offHosts, ranOut] = [0, 0, 0, 0, 0];
    const chatting = survivors.map(async (node) => {
      let i = 0;
      for (; i < this.s.chatsPerNode && !stop; i++) {
        if (await chatOnce(node, this.s.model, CHAT_TIMEOUT_MS)) answered++;
        else failed++;
      }
      if (i === this.s.chatsPerNode) ranOut++;
    });
    const sample = async () => {
      const views = await readViews(survivors);
      samples++;
      const one = hostsOf(views, this.s.model).size === 1;
      if (!one) offHosts++;
      return { views, one };
    };
    const t0 = performance.now();
    for (const v of victims) v.child.proc.kill("SIGKILL");
    let views: Views = [];
    const agreedMs = await this.until(t0, "the survivors to agree", async () => {
      const s = await sample();
      views = s.views;
      return s.one && listsExactly(views, ids) && oneDigest(views);
    });
    this.out.set("churnAgreed", this.seconds(agreedMs, agreementSeen(views, survivors.length - 1)));
    const tailEnd = performance.now() + CHURN_TAIL_MS;
    while (performance.now() < tailEnd) await Promise.all([sample(), Bun.sleep(POLL_MS)]);
    stop = true;
    await Promise.all(chatting);
    this.out.set("churnChats", `${answered} / ${failed}${ranOut ? ` (${ranOut} of ${survivors.length} nodes sent all ${this.s.chatsPerNode} before the end)` : ""}`);
    this.out.set("churnHosts", `${offHosts} of ${samples}`);

    step(`N=${this.n}: restarting the killed`);
    const t1 = performance.now();
    const back = await Promise.all(victims.map((v, i) => this.start(this.joinArgs, { name: `back-${i}`, stateDir: v.stateDir })));
    this.joiners = [...this.joiners.slice(0, -k), ...back];
    const all = this.nodes;
    const restarted = await this.until(t1, "every node to list all again", async () => listsExactly(await readViews(all), all.map((x) => x.nodeId)));
    this.out.set("restarted", this.seconds(restarted));
    this.out.set("sameIds", back.every((b, i) => b.nodeId === victims[i]!.nodeId) ? "yes" : "no");
  }

  /**
   * kill -9 of the founder, the model's one host, while streams through up to HOST_KILL_ENTRIES
   * joiners are in flight (one mid-answer, the rest waiting for its one slot): when each client's
   * request ended, and how (the dialect's error event or status, a cut). Entries that watch the founder (its ring neighbours) see it fall silent themselves; the
   * rest hear it from them (`lost`) and check it. The last phase: the mesh has no host after it.
   */
  async hostKilled(): Promise<void> {
    step(`N=${this.n}: killing the host mid-answer`);
    const entries = this.joiners.slice(0, HOST_KILL_ENTRIES);
    const watching = (await readViews(entries)).map((v) => v?.peers.find((p) => p.nodeId === this.founder.nodeId)?.watched);
    // The founder serves one request at a time (--parallel 1): the first stream under way, the others wait their turn at it.
    const streams = entries.map((e) => startStream(e, this.s.model));
    await Promise.race(streams.map((st) => st.started));
    const t0 = performance.now();
    this.founder.child.proc.kill("SIGKILL");
    const ends = await Promise.all(streams.map((st) => st.end(t0, this.s.deadlineMs)));
    // By how each ended, with the latest end of each kind; a stream that completed before the kill says so.
    const row = (picked: StreamEnd[]) => {
      if (!picked.length) return "none";
      const kinds = new Map<string, number[]>();
      for (const e of picked) {
        const how = e.ms < 0 ? "completed before the kill" : describeStreamEnd(e);
        kinds.set(how, [...(kinds.get(how) ?? []), e.ms]);
      }
      return [...kinds].map(([how, ms]) => `${ms.length} ${how}${how === "completed before the kill" ? "" : `, the last after ${this.seconds(Math.max(...ms))}`}`).join("; ");
    };
    this.out.set("hostKilledNear", row(ends.filter((_, i) => watching[i] !== false)));
    this.out.set("hostKilledFar", row(ends.filter((_, i) => watching[i] === false)));
  }

  /** Stops every node started: the live ones first (a restarted node shares its state dir with the one killed before it). */
  async stop(): Promise<void> {
    const alive = (x: TestNode) => x.child.proc.exitCode === null && x.child.proc.signalCode === null;
    await Promise.all(this.started.filter(alive).map((x) => x.stop()));
    await Promise.all(this.started.map((x) => x.stop()));
  }
}

const sum = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0);
const avg = (xs: readonly number[]) => (xs.length ? sum(xs) / xs.length : NaN);
