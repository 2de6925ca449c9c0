/** API keys through a real client: 401 without, 200 with; /health open; peers forward without keys. */
import { afterAll, afterEach, expect, test } from "bun:test";
import OpenAI from "openai";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { killAllChildren, spawnChild } from "../../harness/children.ts";
import { startMeshNode, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { meshCommand, SMALL_LLAMA, type TestNode } from "../../harness/node.ts";
import { waitFor } from "../../harness/wait.ts";
import { FORWARDED_HEADER } from "../../mesh/mesh-headers.ts";

const nodes: TestNode[] = [];
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
});
afterAll(killAllChildren);

const client = (n: TestNode, apiKey: string) => new OpenAI({ baseURL: `${n.url}/v1`, apiKey, maxRetries: 0 });

test("with --api-key: 401 without a valid key, 200 with any of them; /health stays open; peers forward without keys", async () => {
  const tiny = await testModel("tiny", "q8_0");
  const host: MeshTestNode = await startMeshNode([...SMALL_LLAMA, "--api-key", "host-key", "--model", tiny]);
  nodes.push(host);
  const entry: MeshTestNode = await startMeshNode([...SMALL_LLAMA, "--api-key", "k1", "--api-key", "k2", "--join", host.token]);
  nodes.push(entry);
  // /api/status needs the key too, so the mesh is awaited through it.
  const peersOf = async (n: MeshTestNode, key: string) =>
    ((await (await fetch(`${n.url}/api/status`, { headers: { authorization: `Bearer ${key}` } })).json()) as { peers: unknown[] }).peers.length;
  await waitFor(async () => (await peersOf(host, "host-key")) === 1 && (await peersOf(entry, "k1")) === 1, { what: "the two nodes to see each other" });

  const wrong = await client(entry, "nope").models.list().catch((e: unknown) => e);
  expect(wrong).toBeInstanceOf(OpenAI.AuthenticationError);
  expect((wrong as InstanceType<typeof OpenAI.AuthenticationError>).code).toBe("invalid_api_key");
  const missing = await fetch(`${entry.url}/v1/models`);
  expect(missing.status).toBe(401);
  expect(((await missing.json()) as { error: { message: string } }).error.message).toContain("an API key is required");
  // Pretending to be a peer from outside does not get around it.
  expect((await fetch(`${entry.url}/v1/models`, { headers: { [FORWARDED_HEADER]: "1" } })).status).toBe(401);
  expect((await fetch(`${entry.url}/api/status`)).status).toBe(401);
  expect((await fetch(`${entry.url}/api/status`, { headers: { "x-api-key": "k1" } })).status).toBe(200);
  expect((await fetch(`${entry.url}/health`)).status).toBe(200);

  const ai = client(entry, "k2");
  await waitFor(async () => (await ai.models.list()).data.find((m) => m.id === "tiny-q8_0" && (m as unknown as { status: string }).status === "loaded"), {
    what: "the entry to see the host's model",
  });
  // Answered by the host, which has another key: the mesh carries the request, not the key.
  const chat = await ai.chat.completions.create({ model: "tiny-q8_0", messages: [{ role: "user", content: "hi" }], max_tokens: 2 });
  expect(chat.choices).toHaveLength(1);
});

test("listening beyond loopback without a key is refused before anything starts", async () => {
  const state = mkdtempSync(join(tmpdir(), "mesh-test-state-"));
  const child = spawnChild("mesh", [...meshCommand(), "--listen", "0.0.0.0", "--port", "0", "--state-dir", state, "--relay", "disabled", "--quic-bind", "127.0.0.1:0"]);
  expect(await child.proc.exited).toBe(1);
  expect(child.output()).toContain("refusing to serve the API on 0.0.0.0 without an --api-key");
  expect(child.output()).not.toContain("listening");
  rmSync(state, { recursive: true, force: true });
});

/** Pids of `pid`'s children, from /proc. */
function childrenOf(pid: number): number[] {
  return readdirSync("/proc")
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        return Number(readFileSync(`/proc/${d}/stat`, "utf8").split(") ")[1]!.split(" ")[1]) === pid;
      } catch {
        return false; // gone meanwhile
      }
    })
    .map(Number);
}

test("keys from the environment reach no child: llama-server and rpc-server run without MESH_API_KEY", async () => {
  const tiny = await testModel("tiny", "q8_0");
  const node = await startMeshNode([...SMALL_LLAMA, "--model", tiny], { env: { MESH_API_KEY: "sk-env-secret-1" } });
  nodes.push(node);
  const ai = client(node, "sk-env-secret-1");
  await ai.chat.completions.create({ model: "tiny-q8_0", messages: [{ role: "user", content: "hi" }], max_tokens: 1 });
  const kids = childrenOf(node.child.proc.pid);
  const names = kids.map((k) => readFileSync(`/proc/${k}/comm`, "utf8").trim());
  expect(names.some((n) => n.startsWith("llama-server"))).toBe(true);
  expect(names.some((n) => n.includes("rpc-server"))).toBe(true);
  for (const k of kids) expect(readFileSync(`/proc/${k}/environ`, "utf8")).not.toContain("sk-env-secret-1");
  // The node itself still has its key in effect.
  expect((await fetch(`${node.url}/v1/models`)).status).toBe(401);
});
