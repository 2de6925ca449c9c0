/** Mesh nodes for end-to-end tests: start with loopback QUIC and no relay, read token and id, ask status. */
import { dirname } from "node:path";
import { readJoinToken } from "../../mesh/join-token-file.ts";
import type { MeshStatus } from "../../mesh/status.ts";
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
