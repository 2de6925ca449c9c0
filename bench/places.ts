/**
 * Where a bench runs its nodes: as plain processes on loopback, or each in its own network namespace
 * of the lab (harness/lab/lab.ts) with its link capped. A bench written against `Places` measures the
 * same setup in both; `address` is where other processes (and the bench itself) reach a node, and
 * `beside` runs a plain process in the node's namespace, so a setup without the mesh (llama-server
 * on rpc-servers) crosses the same links.
 */
import { labUnavailable, Lab, type LabNode } from "../harness/lab/lab.ts";
import { spawnChild, type Child } from "../harness/children.ts";
import { startMeshNode, type MeshTestNode } from "../harness/mesh.ts";
import type { StartNodeOptions } from "../harness/node.ts";
import { withDeadline } from "../harness/wait.ts";

export interface PlacedNode extends MeshTestNode {
  /** Where others reach this node's sockets (its API, a process beside it). */
  address: string;
  /** The network namespace it runs in; undefined on loopback. */
  ns?: string;
}

export interface Places {
  /** One line for the bench's output: where the nodes ran. */
  readonly label: string;
  /** Where the bench process itself is seen from the nodes (binds its own sockets there). */
  readonly benchAddress: string;
  start(args: string[], opts?: StartNodeOptions): Promise<PlacedNode>;
  /** A plain process in `node`'s namespace (on loopback: just a process). */
  beside(node: PlacedNode, name: string, argv: string[], env?: Record<string, string>): Child;
  /** kill -9 of the node's mesh process; resolves when it is gone. */
  kill(node: PlacedNode): Promise<void>;
  /** Stops every node this made (and, in the lab, removes the namespaces). */
  close(): Promise<void>;
}

const KILL_DEADLINE_MS = 30_000;

export function loopbackPlaces(): Places {
  const nodes: PlacedNode[] = [];
  return {
    label: "loopback (every node a process on 127.0.0.1, no link limits)",
    benchAddress: "127.0.0.1",
    async start(args, opts) {
      const node = Object.assign(await startMeshNode(args, opts), { address: "127.0.0.1" });
      nodes.push(node);
      return node;
    },
    beside: (_node, name, argv, env) => spawnChild(name, argv, { env }),
    async kill(node) {
      node.child.proc.kill("SIGKILL");
      await withDeadline(node.child.proc.exited, KILL_DEADLINE_MS, `${node.nodeId} to exit after kill -9`);
    },
    async close() {
      await Promise.all(nodes.splice(0).map((n) => n.stop()));
    },
  };
}

/** Lab places with every node's link capped at `mbit` Mbit/s both ways (0: uncapped). */
export async function labPlaces(mbit: number): Promise<Places> {
  const lab = await Lab.create();
  const nodes = new Map<PlacedNode, LabNode>();
  const labNode = (n: PlacedNode) => {
    const found = nodes.get(n);
    if (!found) throw new Error(`${n.nodeId} is not a node of this lab`);
    return found;
  };
  return {
    label: `lab (every node in its own network namespace on a bridge${mbit > 0 ? `, each link capped at ${mbit} Mbit/s both ways by tc tbf` : ""})`,
    benchAddress: lab.gateway,
    async start(args, opts) {
      // Capped before the node starts: a worker that copies a model does so from its first byte.
      const n = await lab.addNode(args, { ...opts, ...(mbit > 0 ? { capMbit: mbit } : {}) });
      nodes.set(n, n);
      return n;
    },
    beside(node, name, argv, env) {
      return spawnChild(name, ["ip", "netns", "exec", labNode(node).ns, ...argv], { env });
    },
    async kill(node) {
      await withDeadline(lab.kill(labNode(node)), KILL_DEADLINE_MS, `${node.nodeId} to go after kill -9`);
    },
    async close() {
      nodes.clear();
      await lab.close();
    },
  };
}

/** Lab places when the lab can run here, else loopback; `why` says why not, when not. */
export async function labOrLoopback(mbit: number): Promise<{ places: Places; why?: string }> {
  const why = labUnavailable();
  return why === undefined ? { places: await labPlaces(mbit) } : { places: loopbackPlaces(), why };
}
