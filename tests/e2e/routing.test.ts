/**
 * Any node answers for a model another node serves: the request crosses the mesh as an HTTP
 * exchange over a QUIC stream and comes back, streaming included.
 */
import { afterAll, expect, test } from "bun:test";
import OpenAI from "openai";
import { loaded, openStream } from "../../harness/api.ts";
import { killAllChildren } from "../../harness/children.ts";
import { meshStatus, startMeshNode, waitForFullMesh, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { waitFor } from "../../harness/wait.ts";

const nodes: MeshTestNode[] = [];
afterAll(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  await killAllChildren();
});

test("a node without the model forwards to the node that serves it, plain and streaming", async () => {
  const host = await startMeshNode([...SMALL_LLAMA, "--model", await testModel("tiny", "q8_0")]);
  nodes.push(host);
  const entry = await startMeshNode([...SMALL_LLAMA, "--join", host.token]);
  nodes.push(entry);
  await waitForFullMesh([host, entry]);
  const name = "tiny-q8_0";
  // The model fits on its host: it runs there alone (the newcomer joins its group as a standby).
  await waitFor(async () => (await loaded(host)).some((s) => s.model_name === name && s.state === "ready"), { what: "the host to serve the model", timeoutMs: 60_000 });
  const ai = new OpenAI({ baseURL: `${entry.url}/v1`, apiKey: "unused", maxRetries: 0 });
  await waitFor(async () => (await ai.models.list()).data.some((m) => m.id === name), { what: "the entry node to list the host's model" });
  const listed = (await ai.models.list()).data.find((m) => m.id === name) as unknown as { status: string; host: string };
  expect(listed).toMatchObject({ status: "loaded", host: host.nodeId });

  const chat = await ai.chat.completions.create({ model: name, messages: [{ role: "user", content: "hello" }], max_tokens: 4 });
  expect(chat.model).toBe(name);
  expect(chat.usage!.completion_tokens).toBeGreaterThan(0);

  // A token that is part of a UTF-8 character waits for the rest: count tokens by the usage, not by
  // chunks. Greedy, so the tokens are the same every run (sampled, now and then most were such parts).
  const params = { model: name, messages: [{ role: "user" as const, content: "hi" }], max_tokens: 5, temperature: 0, stream: true as const, ignore_eos: true, stream_options: { include_usage: true } };
  const chunks = [];
  for await (const chunk of await ai.chat.completions.create(params)) chunks.push(chunk);
  expect(chunks.filter((c) => c.choices[0]?.delta.content).length).toBeGreaterThan(1);
  expect(chunks.findLast((c) => c.choices.length > 0)!.choices[0]!.finish_reason).toBe("length");
  expect(chunks.at(-1)!.usage!.completion_tokens).toBe(5);

  const missing = await ai.chat.completions.create({ model: "nowhere", messages: [{ role: "user", content: "x" }] }).catch((e: unknown) => e);
  expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
  // The entry node never loaded anything itself.
  expect(await loaded(entry)).toEqual([]);
});

test("a host that vanishes mid-stream: the forwarded stream ends with an error event, not a hang", async () => {
  const host = await startMeshNode([...SMALL_LLAMA, "--ctx-size", "16384", "--rpc-direct", "off", "--model", await testModel("tiny", "q8_0")]);
  nodes.push(host);
  const entry = await startMeshNode([...SMALL_LLAMA, "--join", host.token]);
  nodes.push(entry);
  await waitForFullMesh([host, entry]);
  await waitFor(async () => (await loaded(host)).some((s) => s.state === "ready"), { what: "the host to serve the model", timeoutMs: 60_000 });
  await waitFor(async () => (await meshStatus(entry)).peers.some((p) => p.serving.includes("tiny-q8_0")), { what: "the entry to see the model" });
  const stream = await openStream(entry, "tiny-q8_0", 16_000);
  // Frozen, the host says nothing more: the entry drops it after its silence limit.
  process.kill(host.child.proc.pid, "SIGSTOP");
  try {
    const text = await stream.rest();
    expect(text).toContain('"code":"peer_gone"');
    expect(text).not.toContain("[DONE]");
  } finally {
    process.kill(host.child.proc.pid, "SIGCONT");
  }
});
