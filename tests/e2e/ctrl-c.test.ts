/**
 * Issue 31, the first minute: a node with a model loaded stopped as a user stops it. Ctrl-C in a
 * terminal is SIGINT to the whole foreground process group, the node's children included; a
 * service manager may signal the group or the node alone. Every way, the node stops its
 * llama-server and rpc-server itself, says nothing is wrong (no ERROR, nothing "restarting") and
 * leaves no child running. The test's nodes lead their own process group (harness/children.ts),
 * as a shell's foreground job does.
 */
import { afterAll, afterEach, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { chat, loaded } from "../../harness/api.ts";
import { killAllChildren } from "../../harness/children.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA, startNode, type TestNode } from "../../harness/node.ts";
import { waitFor, withDeadline } from "../../harness/wait.ts";

const nodes: TestNode[] = [];
/** llama-server and rpc-server pids the tests saw, killed after each test if one is still there. */
const childPids = new Set<number>();

/** Gone, or a zombie nobody has reaped yet (it runs nothing). */
function gone(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.startsWith("Z") ?? true;
  } catch {
    return true;
  }
}

/** Still one of ours: a pid that outlived its node may be reused by anything once it is gone. */
function isLlamaChild(pid: number): boolean {
  try {
    return /llama-server|rpc-server/.test(readFileSync(`/proc/${pid}/cmdline`, "utf8"));
  } catch {
    return false;
  }
}

afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
  for (const pid of childPids) {
    if (!gone(pid) && isLlamaChild(pid)) process.kill(pid, "SIGKILL");
  }
  childPids.clear();
});
afterAll(killAllChildren);

/** A node that has answered one request, so its llama-server and rpc-server run; with their pids. */
async function nodeWithChildren(): Promise<{ node: TestNode; children: number[] }> {
  const node = await startNode([...SMALL_LLAMA, "--model", "tiny"], { models: { "tiny.gguf": await testModel("tiny", "q8_0") } });
  nodes.push(node);
  const rpc = Number((await node.child.waitForOutput(/rpc-server ready port=\d+ pid=(\d+)/, 60_000))[1]);
  childPids.add(rpc);
  const res = await waitFor(async () => {
    const r = await chat(node, "tiny");
    if (r.status === 200) return r;
    await r.body?.cancel();
    return undefined;
  }, { what: "one chat answered by tiny", timeoutMs: 90_000 });
  await res.body?.cancel();
  const server = (await loaded(node)).find((s) => s.model_name === "tiny" && s.state === "ready");
  if (!server) throw new Error("tiny answered but is not loaded");
  childPids.add(server.pid);
  const children = [server.pid, rpc];
  expect(children.filter(gone)).toEqual([]);
  return { node, children };
}

const cases: [string, NodeJS.Signals, "group" | "node"][] = [
  ["Ctrl-C (SIGINT to the whole process group)", "SIGINT", "group"],
  ["kill -TERM of the whole process group", "SIGTERM", "group"],
  ["kill -TERM of the node alone", "SIGTERM", "node"],
];

test.each(cases)("%s: the node stops its children quietly and exits 0", async (_, signal, target) => {
  const { node, children } = await nodeWithChildren();
  const pid = node.child.proc.pid;
  process.kill(target === "group" ? -pid : pid, signal);
  const code = await withDeadline(node.child.proc.exited, 60_000, `the node to exit after ${signal} to the ${target}`);
  // The node's last line: the output is all there once it shows.
  await node.child.waitForOutput(/^stopped$/m, 5_000);
  const out = node.child.output();
  expect(code).toBe(0);
  expect(out).toContain(`shutting down signal=${signal}`);
  expect(out.split("\n").filter((line) => /\bERROR\b|restarting/.test(line))).toEqual([]);
  // Stopped by the node before it exited, not killed after it by the kernel.
  expect(children.filter((p) => !gone(p))).toEqual([]);
});
