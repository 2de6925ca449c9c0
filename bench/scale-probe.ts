/**
 * What bench/scale.ts reads of its nodes and of the machine: each node's view of the mesh from its
 * `/api/status` (peers, what each serves, one digest of its catalog, its control-stream counters)
 * read as plain JSON, so a binary that lacks a field (an older commit's) still reads, that field
 * missing; a node's CPU time from /proc, whole and by thread; the loopback interface's bytes; one chat.
 */
import { readdirSync, readFileSync } from "node:fs";
import type { TestNode } from "../harness/node.ts";

/** The node's mesh control stream, counted since it started (`control` in its status; absent before it was added). */
export interface ControlCounters {
  sentBytes: number;
  receivedBytes: number;
  sentMessages: number;
  receivedMessages: number;
}

export interface PeerView {
  nodeId: string;
  /** Models it announces it serves, less those it serves as a replica beside their host. */
  hosts: string[];
  /** The node reading it watches it (its ring neighbour, `mesh/watch-ring.ts`); undefined from a node before the ring. */
  watched: boolean | undefined;
}

export interface NodeView {
  nodeId: string | undefined;
  peers: PeerView[];
  /** The node's `catalogDigest`, or one made here from its `/v1/models` when its status has none. */
  digest: string;
  /** Whether the digest is the node's own (`catalogDigest`) or made here. */
  digestOwn: boolean;
  control: ControlCounters | undefined;
  /** Models its own catalog lists this node among the servers of (its status's `models.catalog`). */
  ownServing: string[];
}

const STATUS_TIMEOUT_MS = 5_000;

const record = (v: unknown): Record<string, unknown> => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {});
const text = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined);
const texts = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : []);
const list = (v: unknown): Record<string, unknown>[] => (Array.isArray(v) ? v.map(record) : []);

function controlOf(v: unknown): ControlCounters | undefined {
  const c = record(v);
  const n = (k: string) => (typeof c[k] === "number" ? (c[k] as number) : undefined);
  const [sentBytes, receivedBytes, sentMessages, receivedMessages] = [n("sentBytes"), n("receivedBytes"), n("sentMessages"), n("receivedMessages")];
  if (sentBytes === undefined || receivedBytes === undefined || sentMessages === undefined || receivedMessages === undefined) return undefined;
  return { sentBytes, receivedBytes, sentMessages, receivedMessages };
}

async function getJson(node: TestNode, path: string): Promise<unknown> {
  const res = await fetch(`${node.url}${path}`, { signal: AbortSignal.timeout(STATUS_TIMEOUT_MS) });
  if (res.status !== 200) throw new Error(`${path}: ${res.status}`);
  return res.json();
}

/** A digest of the catalog as `/v1/models` lists it: each model's id and its host, sorted. */
async function modelsDigest(node: TestNode): Promise<string> {
  const entries = list(record(await getJson(node, "/v1/models")).data).map((m) => `${text(m.id) ?? "?"}@${text(m.host) ?? "-"}`);
  return Bun.hash(entries.sort().join("\n")).toString(16);
}

/** The node's view, or undefined when it does not answer (within 5 s). */
export async function readView(node: TestNode): Promise<NodeView | undefined> {
  try {
    const s = record(await getJson(node, "/api/status"));
    const nodeId = text(s.nodeId);
    const peers = list(s.peers).flatMap((p): PeerView[] => {
      const id = text(p.nodeId);
      const replicating = texts(p.replicating);
      return id ? [{ nodeId: id, hosts: texts(p.serving).filter((m) => !replicating.includes(m)), watched: typeof p.watched === "boolean" ? p.watched : undefined }] : [];
    });
    const own = text(s.catalogDigest);
    const ownServing = list(record(s.models).catalog)
      .filter((m) => nodeId !== undefined && texts(m.servers).includes(nodeId))
      .flatMap((m) => text(m.name) ?? []);
    return { nodeId, peers, digest: own ?? (await modelsDigest(node)), digestOwn: own !== undefined, control: controlOf(s.control), ownServing };
  } catch {
    return undefined;
  }
}

/** Every node's view, read at once. */
export const readViews = (nodes: readonly TestNode[]): Promise<(NodeView | undefined)[]> => Promise.all(nodes.map(readView));

/** Every node (`views[i]` is the node with id `ids[i]`) lists exactly the others' ids as peers. */
export function listsExactly(views: readonly (NodeView | undefined)[], ids: readonly string[]): boolean {
  return views.every((v, i) => v !== undefined && JSON.stringify(v.peers.map((p) => p.nodeId).sort()) === JSON.stringify(ids.filter((_, j) => j !== i).sort()));
}

/** Every node answered, and all with one catalog digest. */
export function oneDigest(views: readonly (NodeView | undefined)[]): boolean {
  return views.every((v) => v !== undefined) && new Set(views.map((v) => v?.digest)).size === 1;
}

/** What an unfinished agreement looked like: peers seen per node, and how many catalog digests. */
export function agreementSeen(views: readonly (NodeView | undefined)[], expectedPeers: number): string {
  const counts = views.map((v) => v?.peers.length ?? 0);
  const digests = new Set(views.flatMap((v) => (v ? [v.digest] : []))).size;
  const silent = views.filter((v) => !v).length;
  return `peers seen min ${Math.min(...counts)} / avg ${(counts.reduce((a, b) => a + b, 0) / counts.length).toFixed(1)} of ${expectedPeers} expected; ${digests} catalog digest(s)${silent ? `; ${silent} node(s) did not answer` : ""}`;
}

/** The distinct nodes any of `views` shows hosting `model` (peers' announcements, and each node's own catalog of itself). */
export function hostsOf(views: readonly (NodeView | undefined)[], model: string): Set<string> {
  const hosts = new Set<string>();
  for (const v of views) {
    if (!v) continue;
    for (const p of v.peers) if (p.hosts.includes(model)) hosts.add(p.nodeId);
    if (v.nodeId && v.ownServing.includes(model)) hosts.add(v.nodeId);
  }
  return hosts;
}

/** Control bytes and messages per node per second between two readings of the same nodes; undefined when any lacks counters. */
export function controlRate(before: readonly (NodeView | undefined)[], after: readonly (NodeView | undefined)[], seconds: number): { sentBps: number; receivedBps: number; messagesPs: number } | undefined {
  let sent = 0;
  let received = 0;
  let messages = 0;
  for (const [i, b] of before.entries()) {
    const [x, y] = [b?.control, after[i]?.control];
    if (!x || !y) return undefined;
    sent += y.sentBytes - x.sentBytes;
    received += y.receivedBytes - x.receivedBytes;
    messages += y.sentMessages - x.sentMessages;
  }
  const per = before.length * seconds;
  return { sentBps: sent / per, receivedBps: received / per, messagesPs: messages / per };
}

const CLK_TCK = Number(new TextDecoder().decode(Bun.spawnSync(["getconf", "CLK_TCK"]).stdout).trim()) || 100;

/** CPU seconds `pid` itself has used (user + system, its threads but not its children), or undefined when it is gone. */
export function cpuSeconds(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Field 2 (the name) may hold spaces: count from its ')'. utime and stime are fields 14 and 15.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
  } catch {
    return undefined;
  }
}

/** Which part of a node a thread belongs to, by its name: the event loop (the main thread), iroh's runtime, or the rest (JIT, GC, allocator). */
export type ThreadPart = "loop" | "iroh" | "rest";

export function threadPart(tid: number, pid: number, name: string): ThreadPart {
  if (tid === pid) return "loop";
  return name.startsWith("tokio-") ? "iroh" : "rest";
}

/** One thread's CPU seconds and voluntary context switches (its wake-ups) so far. */
export interface ThreadTimes {
  part: ThreadPart;
  cpu: number;
  wakes: number;
}

/** The live threads of `pid` by thread id (none when it is gone). */
export function threadTimes(pid: number): Map<number, ThreadTimes> {
  const out = new Map<number, ThreadTimes>();
  let tids: string[] = [];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
      const status = readFileSync(`/proc/${pid}/task/${tid}/status`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      out.set(Number(tid), {
        part: threadPart(Number(tid), pid, stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"))),
        cpu: (Number(fields[11]) + Number(fields[12])) / CLK_TCK,
        wakes: Number(/\nvoluntary_ctxt_switches:\s+(\d+)/.exec(status)?.[1] ?? 0),
      });
    } catch {
      // the thread ended between the listing and the read
    }
  }
  return out;
}

/**
 * What each part of a process used between two looks (pure). A thread that ended meanwhile took
 * its time with it, and one born meanwhile counts from zero; so "rest" (where threads come and go:
 * JIT, GC) gets the process's own total less the other two when that total is given.
 */
export function partsBetween(before: ReadonlyMap<number, ThreadTimes>, after: ReadonlyMap<number, ThreadTimes>, processCpu?: number): Record<ThreadPart, ThreadTimes> {
  const out: Record<ThreadPart, ThreadTimes> = { loop: { part: "loop", cpu: 0, wakes: 0 }, iroh: { part: "iroh", cpu: 0, wakes: 0 }, rest: { part: "rest", cpu: 0, wakes: 0 } };
  for (const [tid, t] of after) {
    const was = before.get(tid);
    out[t.part].cpu += t.cpu - (was?.cpu ?? 0);
    out[t.part].wakes += t.wakes - (was?.wakes ?? 0);
  }
  if (processCpu !== undefined) out.rest.cpu = Math.max(0, processCpu - out.loop.cpu - out.iroh.cpu);
  return out;
}

/** Bytes the loopback interface has received (every byte sent on it is received on it once). */
export function loopbackBytes(): number {
  const line = readFileSync("/proc/net/dev", "utf8").split("\n").find((l) => l.trim().startsWith("lo:"));
  return Number(line?.split(":")[1]?.trim().split(/\s+/)[0] ?? NaN);
}

/** One non-streamed chat of one token through `node`: answered 200 within `timeoutMs`. */
export async function chatOnce(node: TestNode, model: string, timeoutMs: number): Promise<boolean> {
  try {
    const res = await fetch(`${node.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }], max_tokens: 1 }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    await res.arrayBuffer();
    return res.status === 200;
  } catch {
    return false;
  }
}
