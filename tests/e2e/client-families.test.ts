/**
 * The client libraries users build on, beyond the vendors' SDKs, against a node that hosts the
 * models and a node that forwards to it: the Vercel AI SDK with its OpenAI-compatible provider
 * (base URL `/v1`) and its Ollama provider (`/api`), and LangChain's Ollama integration (the
 * node's root). Each generates, streams and embeds.
 */
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { ChatOllama, OllamaEmbeddings } from "@langchain/ollama";
import { embed, generateText, streamText } from "ai";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createOllama } from "ollama-ai-provider-v2";
import { killAllChildren } from "../../harness/children.ts";
import { hostAndEntry, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";

const MODEL = "tiny-q8_0";
const EMBED = "embed";
const nodes: MeshTestNode[] = [];
let host: MeshTestNode;
let entry: MeshTestNode;

beforeAll(async () => {
  // The embedding model is in the host's models dir, loaded when asked for; the mesh serves the chat model.
  const embedModel = { [`${EMBED}.gguf`]: await testModel("embed") };
  ({ host, entry } = await hostAndEntry(MODEL, [...SMALL_LLAMA, "--model", await testModel("tiny", "q8_0")], SMALL_LLAMA, nodes, { models: embedModel }));
}, 120_000);
afterAll(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  await killAllChildren();
});

// Greedy and short: the test model has random weights.
const SHORT = { maxOutputTokens: 4, temperature: 0, maxRetries: 0 } as const;

describe.each([
  ["the serving node", () => host],
  ["a node that forwards", () => entry],
])("through %s", (_, node) => {
  test("Vercel AI SDK, OpenAI-compatible provider: generateText, streamText, embed", async () => {
    const mesh = createOpenAICompatible({ name: "mesh", baseURL: `${node().url}/v1`, includeUsage: true });
    const whole = await generateText({ model: mesh(MODEL), prompt: "hello", ...SHORT });
    expect(whole.usage.outputTokens).toBeGreaterThan(0);
    expect(["length", "stop"]).toContain(whole.finishReason);

    const streamed = streamText({ model: mesh(MODEL), prompt: "hello", ...SHORT, onError: () => undefined });
    let text = "";
    for await (const piece of streamed.textStream) text += piece;
    expect(await streamed.text).toBe(text);
    expect(["length", "stop"]).toContain(await streamed.finishReason);
    expect((await streamed.usage).outputTokens).toBeGreaterThan(0);

    const { embedding } = await embed({ model: mesh.embeddingModel(EMBED), value: "hello world", maxRetries: 0 });
    expect(embedding.length).toBeGreaterThan(0);
  });

  test("Vercel AI SDK, Ollama provider: generateText, streamText, embed", async () => {
    const ollama = createOllama({ baseURL: `${node().url}/api` });
    const whole = await generateText({ model: ollama(MODEL), prompt: "hello", ...SHORT });
    expect(whole.usage.outputTokens).toBeGreaterThan(0);

    const streamed = streamText({ model: ollama(MODEL), prompt: "hello", ...SHORT, onError: () => undefined });
    let text = "";
    for await (const piece of streamed.textStream) text += piece;
    expect(await streamed.text).toBe(text);
    expect((await streamed.usage).outputTokens).toBeGreaterThan(0);

    const { embedding } = await embed({ model: ollama.textEmbeddingModel(EMBED), value: "hello world", maxRetries: 0 });
    expect(embedding.length).toBeGreaterThan(0);
  });

  test("LangChain ChatOllama and OllamaEmbeddings: invoke, stream, embedQuery", async () => {
    const chat = new ChatOllama({ baseUrl: node().url, model: MODEL, numPredict: 4, temperature: 0, maxRetries: 0 });
    const answer = await chat.invoke("hello");
    expect(answer.usage_metadata?.output_tokens).toBeGreaterThan(0);

    const chunks = [];
    for await (const chunk of await chat.stream("hello")) chunks.push(chunk);
    expect(chunks.length).toBeGreaterThan(0);
    // The last chunk carries the answer's figures (Ollama's final line).
    expect(chunks.some((c) => (c.usage_metadata?.output_tokens ?? 0) > 0)).toBe(true);

    const vector = await new OllamaEmbeddings({ baseUrl: node().url, model: EMBED, maxRetries: 0 }).embedQuery("hello world");
    expect(vector.length).toBeGreaterThan(0);
  });
});
