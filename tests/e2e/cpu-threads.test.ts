/**
 * How a real node shares its cores (pool/cpu-threads.ts), read from its children's command lines:
 * two models that may run at once divide the cores and do not poll; a node with one model at a
 * time starts llama-server as before; the operator's `--threads` and `--rpc-threads` win, and
 * `--threads-policy all` gives every process llama.cpp's own threads.
 */
import { afterAll, afterEach, beforeAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { chat, loaded, post } from "../../harness/api.ts";
import { killAllChildren } from "../../harness/children.ts";
import { testModel } from "../../harness/models.ts";
import { startNode, type TestNode } from "../../harness/node.ts";
import { descendantsOf } from "../../harness/processes.ts";
import { waitFor } from "../../harness/wait.ts";

const CORES = availableParallelism();
const nodes: TestNode[] = [];
let files: Record<string, string>;
beforeAll(async () => {
  const tiny = await testModel("tiny", "q8_0");
  files = { "a.gguf": tiny, "b.gguf": await testModel("tiny", "q8_0", 2) };
});
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
});
afterAll(killAllChildren);

async function node(args: string[], models = files): Promise<TestNode> {
  const n = await startNode(["--ctx-size", "512", ...args], { models });
  nodes.push(n);
  return n;
}

/** The threads flags of a command line, as given. */
function threadFlags(argv: readonly string[]): string {
  return argv.flatMap((a, i) => (["-t", "--threads", "-tb", "--threads-batch", "--poll"].includes(a) ? [`${a} ${argv[i + 1]}`] : [])).join(" ");
}

/** Loads `model` and answers one chat with it; its llama-server's threads flags. */
async function serverThreads(n: TestNode, model: string): Promise<string> {
  const res = await post(n, "/api/v1/load", { model_name: model });
  expect(res.status).toBe(200);
  expect((await chat(n, model)).status).toBe(200);
  const s = (await loaded(n)).find((x) => x.model_name === model)!;
  return threadFlags(readFileSync(`/proc/${s.pid}/cmdline`, "utf8").split("\0"));
}

async function rpcThreads(n: TestNode): Promise<string> {
  const rpc = await waitFor(() => descendantsOf(n.child.proc.pid).find((p) => /rpc-server /.test(p.cmdline)), { what: "the node's rpc-server", timeoutMs: 30_000 });
  return threadFlags(rpc.cmdline.split(" "));
}

const share = (processes: number) => Math.max(1, Math.floor(CORES / processes));

test("two models that may run at once divide the cores and do not poll; the rpc-server keeps every core (a split's work)", async () => {
  const n = await node(["--max-loaded-models", "2", "--llamacpp-args", "--parallel 1"]);
  const want = `-t ${share(2)} -tb ${share(2)} --poll 0`;
  expect(await serverThreads(n, "a")).toBe(want);
  expect(await serverThreads(n, "b")).toBe(want);
  expect(await rpcThreads(n)).toBe(`-t ${CORES}`);
});

test("one model at a time: llama-server starts with llama.cpp's own threads, as before", async () => {
  const n = await node(["--llamacpp-args", "--parallel 1"], { "a.gguf": files["a.gguf"]! });
  expect(await serverThreads(n, "a")).toBe("");
  expect(await rpcThreads(n)).toBe(`-t ${CORES}`);
});

test("the operator's --threads and --rpc-threads win; --threads-policy all leaves llama.cpp's own", async () => {
  const given = await node(["--max-loaded-models", "2", "--llamacpp-args", "--threads 1 --parallel 1", "--rpc-threads", "2"]);
  expect(await serverThreads(given, "a")).toBe("--poll 0 --threads 1");
  expect(await rpcThreads(given)).toBe("-t 2");
  await given.stop();
  nodes.splice(nodes.indexOf(given), 1);

  const all = await node(["--max-loaded-models", "2", "--llamacpp-args", "--parallel 1", "--threads-policy", "all"]);
  expect(await serverThreads(all, "a")).toBe("");
  expect(await rpcThreads(all)).toBe(`-t ${CORES}`);
});
