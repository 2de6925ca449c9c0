/**
 * The lab: mesh nodes each in their own network namespace on a Linux bridge with real addresses,
 * so join tokens, direct TLS and QUIC see non-loopback addresses; links that can be capped, cut
 * and partitioned; nodes that can be frozen or killed. The test process sits at .1 on the bridge
 * and reaches every node's API. Root only: `labUnavailable()` says why it cannot run elsewhere.
 * Everything a lab makes is removed by `close()`, at process exit, or by the next lab to start
 * once its owner is gone (names carry the owner's pid).
 */
import { mkdirSync, rmSync } from "node:fs";
import { meshReady, type MeshTestNode } from "../mesh.ts";
import { meshCommand, startNode, type StartNodeOptions, type TestNode } from "../node.ts";
import { waitFor } from "../wait.ts";
import { alive, claimSubnet, cleanDeadLabs, cmdline, inNs, killNsProcesses, labNames, nsPids, sh, tbfArgs, tmpfsDir, type LabNames } from "./lab-net.ts";

export { delayingRelay } from "./delaying-relay.ts";

export interface LabNode extends MeshTestNode {
  /** network namespace name */
  ns: string;
  /** its IPv4 address on the lab bridge, e.g. "10.201.0.3" */
  address: string;
  /** bridge-side veth name (what cut/heal/cap act on) */
  link: string;
  /** namespace-side veth name */
  nsLink: string;
}

let unavailable: { why: string | undefined } | undefined;

/** Why the lab cannot run here (not root, no `ip`, netns creation fails), or undefined. Cached. */
export function labUnavailable(): string | undefined {
  unavailable ??= { why: probe() };
  return unavailable.why;
}

function probe(): string | undefined {
  if (process.platform !== "linux") return `the lab needs Linux network namespaces (this is ${process.platform})`;
  if (process.getuid?.() !== 0) return "the lab needs root (ip netns, veth, bridges)";
  for (const tool of ["ip", "tc"]) if (!Bun.which(tool)) return `the lab needs \`${tool}\` (iproute2)`;
  const ns = `mesh-lab-${process.pid}-probe`;
  const br = `ml${process.pid.toString(36)}-probe`;
  try {
    sh(["ip", "netns", "add", ns]);
    sh(["ip", "link", "add", br, "type", "bridge"]);
    return undefined;
  } catch (err) {
    return `network namespaces or bridges cannot be made here: ${(err as Error).message}`;
  } finally {
    sh(["ip", "link", "del", br], { ok: true });
    sh(["ip", "netns", "del", ns], { ok: true });
  }
}

const open = new Set<Lab>();
let labCount = 0;
process.on("exit", () => {
  for (const lab of open) lab.closeSync();
});
// A test run stopped by a signal still runs the exit handlers above (and children.ts's).
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.once(sig, () => process.exit(128 + (sig === "SIGINT" ? 2 : sig === "SIGTERM" ? 15 : 1)));

export class Lab {
  readonly nodes: LabNode[] = [];
  /** First three octets of the lab's /24; the test process is `${prefix}.1`. */
  readonly prefix: string;
  private readonly names: LabNames;
  private readonly releaseSubnet: () => void;
  private readonly namespaces: string[] = [];
  private readonly bridges: string[] = [];
  private readonly mounts: string[] = [];
  private nextIndex = 0;
  private bridgeCount = 0;
  private closed = false;
  /** The MAC of .1 on every bridge of the lab (locally administered, random). */
  private readonly mac = ["02", ...Array.from(crypto.getRandomValues(new Uint8Array(5)), (b) => b.toString(16).padStart(2, "0"))].join(":");

  private constructor(names: LabNames, subnet: { prefix: string; release(): void }) {
    this.names = names;
    this.prefix = subnet.prefix;
    this.releaseSubnet = subnet.release;
  }

  /** Makes a fresh bridge with its own /24 (unique per Lab); the root namespace gets .1 on it so the test process reaches node APIs. */
  static async create(): Promise<Lab> {
    const why = labUnavailable();
    if (why) throw new Error(`the lab cannot run here: ${why}`);
    const removed = cleanDeadLabs();
    if (removed.length > 0) console.log(`lab: removed what dead labs left: ${removed.join(", ")}`);
    const lab = new Lab(labNames(process.pid, labCount++), claimSubnet(process.pid));
    open.add(lab);
    try {
      const br = lab.names.bridge(0);
      sh(["ip", "link", "add", br, "type", "bridge"]);
      lab.bridges.push(br);
      // A fixed MAC: a bridge otherwise takes its lowest port's, which changes as nodes come and go,
      // and nodes would send to .1 at a stale address until their ARP entry expires.
      sh(["ip", "link", "set", br, "address", lab.mac]);
      sh(["ip", "addr", "add", `${lab.prefix}.1/24`, "dev", br]);
      sh(["ip", "link", "set", br, "up"]);
    } catch (err) {
      lab.closeSync();
      throw err;
    }
    return lab;
  }

  /** The test process's address on the lab bridge. */
  get gateway(): string {
    return `${this.prefix}.1`;
  }

  /**
   * A namespace + veth + address for a new node, then `bun main.ts` inside it (the conventions of
   * startNode, listening on the lab address with --insecure: the namespace is private to the test).
   * `capMbit` caps its link before the node starts.
   */
  async addNode(args: string[], opts: StartNodeOptions & { modelsDir?: string; capMbit?: number; spawned?: (node: TestNode) => void } = {}): Promise<LabNode> {
    const i = this.nextIndex++;
    const ns = this.names.ns(i);
    const link = this.names.veth(i, "h");
    const nsLink = this.names.veth(i, "n");
    const address = `${this.prefix}.${i + 2}`;
    if (i + 2 > 254) throw new Error("a lab holds at most 253 nodes");
    sh(["ip", "netns", "add", ns]);
    this.namespaces.push(ns);
    sh(["ip", "link", "add", link, "type", "veth", "peer", "name", nsLink, "netns", ns]);
    sh(["ip", "link", "set", link, "master", this.bridges[0]!, "up"]);
    sh(inNs(ns, ["ip", "link", "set", "lo", "up"]));
    sh(inNs(ns, ["ip", "addr", "add", `${address}/24`, "dev", nsLink]));
    sh(inNs(ns, ["ip", "link", "set", nsLink, "up"]));
    // A cap from the first byte: a node that copies a model as soon as it joins.
    if (opts.capMbit !== undefined) {
      sh(tbfArgs(link, opts.capMbit));
      sh(inNs(ns, tbfArgs(nsLink, opts.capMbit)));
    }
    const labArgs = ["--listen", address, "--insecure", "--quic-bind", `${address}:0`, ...(opts.modelsDir ? ["--models-dir", opts.modelsDir] : [])];
    const node = await startNode([...labArgs, ...args], { ...opts, name: opts.name ?? `lab-node-${i}`, command: inNs(ns, opts.command ?? meshCommand()) });
    // A bench times what the node does before its endpoint is up (its join token, its start).
    opts.spawned?.(node);
    try {
      const ready = await meshReady(node);
      const labNode = Object.assign(ready, { ns, address, link, nsLink });
      this.nodes.push(labNode);
      return labNode;
    } catch (err) {
      await node.stop();
      throw err;
    }
  }

  /** A tmpfs of `bytes` (e.g. a models dir that fills up), unmounted by close(). */
  tmpfs(bytes: number): string {
    const dir = tmpfsDir(this.names, this.mounts.length);
    mkdirSync(dir, { recursive: true });
    sh(["mount", "-t", "tmpfs", "-o", `size=${bytes}`, "tmpfs", dir]);
    this.mounts.push(dir);
    return dir;
  }

  /** Cap the node's link to `mbit` Mbit/s in both directions (tc tbf on both veth ends). */
  async cap(node: LabNode, mbit: number): Promise<void> {
    sh(tbfArgs(node.link, mbit));
    sh(inNs(node.ns, tbfArgs(node.nsLink, mbit)));
  }

  async uncap(node: LabNode): Promise<void> {
    sh(["tc", "qdisc", "del", "dev", node.link, "root"], { ok: true });
    sh(inNs(node.ns, ["tc", "qdisc", "del", "dev", node.nsLink, "root"]), { ok: true });
  }

  /** Cut the node off the bridge (link down) / put it back. */
  async cut(node: LabNode): Promise<void> {
    sh(["ip", "link", "set", node.link, "down"]);
  }

  async heal(node: LabNode): Promise<void> {
    sh(["ip", "link", "set", node.link, "up"]);
  }

  /**
   * The given nodes move to a second bridge: they reach each other but not the rest. The test
   * process still reaches them: the second bridge carries .1 as well, with a host route per node.
   * The sides stay apart even where the root namespace forwards: a node reaches a lab address
   * on-link, by ARP, and ARP does not cross bridges.
   */
  async partition(side: readonly LabNode[]): Promise<{ heal(): Promise<void> }> {
    const br = this.names.bridge(++this.bridgeCount);
    sh(["ip", "link", "add", br, "type", "bridge"]);
    this.bridges.push(br);
    // .1 keeps its MAC on this side too: when the partition heals, nodes' ARP entries for it still hold.
    sh(["ip", "link", "set", br, "address", this.mac]);
    sh(["ip", "addr", "add", `${this.gateway}/32`, "dev", br]);
    sh(["ip", "link", "set", br, "up"]);
    for (const n of side) {
      sh(["ip", "link", "set", n.link, "master", br]);
      sh(["ip", "route", "add", `${n.address}/32`, "dev", br, "src", this.gateway]);
    }
    let healed = false;
    return {
      heal: async () => {
        if (healed) return;
        healed = true;
        for (const n of side) {
          sh(["ip", "route", "del", `${n.address}/32`, "dev", br], { ok: true });
          sh(["ip", "link", "set", n.link, "master", this.bridges[0]!]);
        }
        sh(["ip", "link", "del", br], { ok: true });
        this.bridges.splice(this.bridges.indexOf(br), 1);
      },
    };
  }

  /** SIGSTOP / SIGCONT the node's mesh process (`ip netns exec` execs it: same pid). */
  freeze(node: LabNode): void {
    process.kill(node.child.proc.pid, "SIGSTOP");
  }

  thaw(node: LabNode): void {
    try {
      process.kill(node.child.proc.pid, "SIGCONT");
    } catch {
      // gone already
    }
  }

  /** kill -9 the node's mesh process (its llama.cpp children die with it via pdeathsig); resolves when it is gone. */
  async kill(node: LabNode): Promise<void> {
    node.child.proc.kill("SIGKILL");
    await node.child.proc.exited;
  }

  /** Processes (pids + argv) still running inside the lab's namespaces. */
  processesLeft(): { ns: string; pid: number; cmd: string }[] {
    return this.namespaces.flatMap((ns) => nsPids(ns).map((pid) => ({ ns, pid, cmd: cmdline(pid) })));
  }

  /**
   * SIGTERM to the node's mesh process alone (not its process group, which startNode's stop would
   * also kill): resolves with what still runs in its namespace 5 s after it exited, i.e. orphans.
   */
  async terminate(node: LabNode): Promise<{ ns: string; pid: number; cmd: string }[]> {
    this.thaw(node);
    const proc = node.child.proc;
    proc.kill("SIGTERM");
    const timer = setTimeout(() => proc.kill("SIGKILL"), 15_000);
    await proc.exited;
    clearTimeout(timer);
    const left = () => nsPids(node.ns).map((pid) => ({ ns: node.ns, pid, cmd: cmdline(pid) }));
    await waitFor(() => left().length === 0, { what: `${node.ns} to empty`, timeoutMs: 5_000 }).catch(() => undefined);
    return left();
  }

  /** Stops a node (SIGTERM, as startNode does) and waits until nothing runs in its namespace. */
  async stopNode(node: LabNode): Promise<void> {
    this.thaw(node);
    await node.stop();
    await waitFor(() => nsPids(node.ns).length === 0, { what: `nothing left running in ${node.ns}`, timeoutMs: 15_000 }).catch(() => killNsProcesses(node.ns));
  }

  /** Stops every node, deletes namespaces, bridges, veths, tmpfs mounts it made. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    await Promise.all(this.nodes.map((n) => this.stopNode(n).catch(() => undefined)));
    this.closeSync();
  }

  /** What close() does without waiting for nodes to stop gracefully (the exit handler's version). */
  closeSync(): void {
    if (this.closed) return;
    this.closed = true;
    open.delete(this);
    for (const n of this.nodes) {
      this.thaw(n);
      if (alive(n.child.proc.pid)) n.child.proc.kill("SIGKILL");
      rmSync(n.stateDir, { recursive: true, force: true });
      rmSync(n.modelsDir, { recursive: true, force: true });
    }
    // Deleting a veth's bridge end removes the pair at once; a namespace goes only once nothing holds it.
    for (const n of this.nodes) sh(["ip", "link", "del", n.link], { ok: true });
    for (const ns of this.namespaces) {
      killNsProcesses(ns);
      sh(["ip", "netns", "del", ns], { ok: true });
    }
    for (const br of this.bridges) sh(["ip", "link", "del", br], { ok: true });
    for (const dir of this.mounts) {
      sh(["umount", "-l", dir], { ok: true });
      rmSync(dir, { recursive: true, force: true });
    }
    this.releaseSubnet();
  }
}
