/**
 * Lemonade's base URL across the mesh: a chat an openai client sends to `/api/v1` of a node
 * without the model reaches the node that serves it (under `/v1`, the path a member may ask for).
 */
import { afterAll, expect, test } from "bun:test";
import OpenAI from "openai";
import { loaded } from "../../harness/api.ts";
import { killAllChildren } from "../../harness/children.ts";
import { startMeshNode, waitForFullMesh, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { waitFor } from "../../harness/wait.ts";
import { ANSWERED_BY_HEADER } from "../../mesh/mesh-headers.ts";

const nodes: MeshTestNode[] = [];
afterAll(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  await killAllChildren();
});

test("a chat to /api/v1 of a node without the model is answered by its host, plain and streamed", async () => {
  const host = await startMeshNode([...SMALL_LLAMA, "--model", await testModel("tiny", "q8_0")]);
  nodes.push(host);
  const entry = await startMeshNode([...SMALL_LLAMA, "--join", host.token]);
  nodes.push(entry);
  await waitForFullMesh([host, entry]);
  const name = "tiny-q8_0";
  await waitFor(async () => (await loaded(host)).some((s) => s.model_name === name && s.state === "ready"), { what: "the host to serve the model", timeoutMs: 60_000 });
  const ai = new OpenAI({ baseURL: `${entry.url}/api/v1`, apiKey: "unused", maxRetries: 0 });
  await waitFor(async () => (await ai.models.list()).data.some((m) => m.id === name), { what: "the entry node to list the host's model" });

  const { data: chat, response } = await ai.chat.completions.create({ model: name, messages: [{ role: "user", content: "hello" }], max_tokens: 3 }).withResponse();
  expect(chat.usage!.completion_tokens).toBeGreaterThan(0);
  expect(response.headers.get(ANSWERED_BY_HEADER)).toBe(host.nodeId);
  const chunks = [];
  const params = { model: name, messages: [{ role: "user" as const, content: "hi" }], max_tokens: 4, stream: true as const, ignore_eos: true };
  for await (const chunk of await ai.chat.completions.create(params)) chunks.push(chunk);
  expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe("length");
  expect(await loaded(entry)).toEqual([]);
});
