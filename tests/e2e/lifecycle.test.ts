/**
 * The node as a daemon: SIGTERM lets a streaming request finish and leaves no child; a node killed
 * with kill -9 (which cannot stop anything) leaves no llama-server or rpc-server behind either.
 */
import { afterAll, afterEach, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { loaded, openStream } from "../../harness/api.ts";
import { killAllChildren } from "../../harness/children.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA, startNode, type TestNode } from "../../harness/node.ts";
import { waitFor } from "../../harness/wait.ts";

const nodes: TestNode[] = [];
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
});
afterAll(killAllChildren);

/** Gone, or a zombie nobody has reaped yet (it runs nothing). */
function gone(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.startsWith("Z") ?? true;
  } catch {
    return true;
  }
}

/** A node serving tiny, with the pids of its llama-server and rpc-server. */
async function nodeWithChildren(): Promise<{ node: TestNode; children: number[] }> {
  const node = await startNode([...SMALL_LLAMA, "--model", await testModel("tiny", "q8_0")]);
  nodes.push(node);
  const server = await waitFor(async () => (await loaded(node)).find((s) => s.state === "ready"), { what: "the model to load" });
  const rpc = Number((await node.child.waitForOutput(/rpc-server ready port=\d+ pid=(\d+)/))[1]);
  const children = [server.pid, rpc];
  expect(children.every((pid) => !gone(pid))).toBe(true);
  return { node, children };
}

test("SIGTERM with a streaming request in flight: the request finishes, every child stops, exit 0", async () => {
  const { node, children } = await nodeWithChildren();
  const stream = await openStream(node, "tiny-q8_0", 300);
  node.child.proc.kill("SIGTERM");
  const text = await stream.rest();
  expect(text).toContain("[DONE]");
  expect(await node.child.proc.exited).toBe(0);
  expect(children.filter((pid) => !gone(pid))).toEqual([]);
});

test("kill -9 of the node: its llama-server and rpc-server exit within 5 s", async () => {
  const { node, children } = await nodeWithChildren();
  // The node alone, not its process group: only the node itself dies.
  node.child.proc.kill("SIGKILL");
  await node.child.proc.exited;
  await waitFor(() => children.every(gone), { what: "the node's children to exit", timeoutMs: 5_000 });
});
