/** Mesh nodes for end-to-end tests: start with loopback QUIC and no relay, read token and id, ask status. */
import { dirname } from "node:path";
import { loaded } from "./api.ts";
import { readJoinToken } from "../mesh/join-token-file.ts";
import type { MeshStatus } from "../mesh/status.ts";
import { startNode, type StartNodeOptions, type TestNode } from "./node.ts";
import { waitFor } from "./wait.ts";

export interface MeshTestNode extends TestNode {
  token: string;
  nodeId: string;
}

/**
 * Waits for the node's mesh endpoint (its "mesh endpoint up" line) and reads the join token from
 * the file the next line names (the state dir it runs with: a test may pass its own --state-dir).
 */
export async function meshReady(node: TestNode): Promise<MeshTestNode> {
  const m = await node.child.waitForOutput(/mesh endpoint up node=(\S+)/, 60_000);
  const file = (await node.child.waitForOutput(/join token in (.+?); `mesh token`/, 10_000))[1]!;
  const token = readJoinToken(dirname(file));
  if (!token) throw new Error(`node ${m[1]} is up but wrote no join token in ${file}`);
  return Object.assign(node, { token, nodeId: m[1]! });
}

/** The line a node logs once its join token is made, before its endpoint is up (benches time it), with its id; one that makes both at once logs only the second. */
export const TOKEN_MADE = /(?:mesh identity ready|mesh endpoint up)\S* [^\n]*?node=(\S+)/;

export async function startMeshNode(args: string[] = [], opts: StartNodeOptions = {}): Promise<MeshTestNode> {
  return meshReady(await startNode(args, opts));
}

export async function meshStatus(node: TestNode): Promise<MeshStatus> {
  return (await (await fetch(`${node.url}/api/status`)).json()) as MeshStatus;
}

export async function peerIds(node: TestNode): Promise<string[]> {
  return (await meshStatus(node)).peers.map((p) => p.nodeId).sort();
}

/** Waits until every node lists exactly the others as peers. */
export async function waitForFullMesh(nodes: readonly MeshTestNode[], timeoutMs = 30_000): Promise<void> {
  await waitFor(
    async () => {
      for (const n of nodes) {
        const expected = nodes.filter((o) => o !== n).map((o) => o.nodeId).sort();
        if (JSON.stringify(await peerIds(n)) !== JSON.stringify(expected)) return false;
      }
      return true;
    },
    { what: `a full mesh of ${nodes.length} nodes`, timeoutMs },
  );
}

/**
 * A host started with `hostArgs` that serves `model`, and an entry node joined to it (started with
 * `entryArgs`) that knows the host serves it: requests to the entry are forwarded. Both are pushed
 * onto `nodes` as they start, so the caller's cleanup stops them even when a wait fails.
 * `hostOpts` start the host with more (other models in its models dir).
 */
export async function hostAndEntry(model: string, hostArgs: string[], entryArgs: string[], nodes: { push(node: MeshTestNode): unknown }, hostOpts: StartNodeOptions = {}): Promise<{ host: MeshTestNode; entry: MeshTestNode }> {
  const host = await startMeshNode(hostArgs, hostOpts);
  nodes.push(host);
  const entry = await startMeshNode([...entryArgs, "--join", host.token]);
  nodes.push(entry);
  await waitForFullMesh([host, entry]);
  await waitFor(async () => (await loaded(host)).some((s) => s.model_name === model && s.state === "ready"), { what: "the host to serve the model", timeoutMs: 60_000 });
  await waitFor(async () => (await meshStatus(entry)).peers.some((p) => p.serving.includes(model)), { what: "the entry to see the model" });
  return { host, entry };
}
