/**
 * Every test model loads in the real llama-server and does its job: chat and text completions
 * through the `openai` client for generative models, embeddings for the embedding model, and a
 * tokenizer that round-trips text.
 */
import { afterAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { killAllChildren } from "../../harness/children.ts";
import { startLlamaServer } from "../../harness/llama.ts";
import { testModel } from "../../harness/models.ts";
import { WEIGHT_TYPES } from "../../scripts/test-model/presets.ts";

afterAll(killAllChildren);

const client = (url: string) => new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0 });

describe.each(["tiny", "wide"] as const)("%s", (preset) => {
  test.each(WEIGHT_TYPES)("%s: loads, completes a chat and a prompt, and its tokenizer round-trips", async (type) => {
    const server = await startLlamaServer(await testModel(preset, type));
    try {
      const ai = client(server.url);
      const chat = await ai.chat.completions.create({
        model: "test",
        messages: [{ role: "user", content: "hello world" }],
        max_tokens: 8,
        temperature: 0,
      });
      expect(chat.choices[0]!.message.role).toBe("assistant");
      expect(typeof chat.choices[0]!.message.content).toBe("string");
      expect(chat.usage!.prompt_tokens).toBeGreaterThan(3);

      const completion = await ai.completions.create({ model: "test", prompt: "the quick brown fox", max_tokens: 8, temperature: 0 });
      expect(completion.usage!.completion_tokens).toBeGreaterThan(0);

      // The chat template is ours (ChatML) and the tokenizer splits known words into whole tokens.
      const applied = await (await fetch(`${server.url}/apply-template`, {
        method: "POST",
        body: JSON.stringify({ messages: [{ role: "user", content: "hi" }] }),
      })).json() as { prompt: string };
      expect(applied.prompt).toBe("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");

      const text = "hello world, the mesh model: 42 caf\u00e9!";
      const { tokens } = await (await fetch(`${server.url}/tokenize`, { method: "POST", body: JSON.stringify({ content: text }) })).json() as { tokens: number[] };
      expect(tokens.length).toBeLessThan(text.length);
      const { content } = await (await fetch(`${server.url}/detokenize`, { method: "POST", body: JSON.stringify({ tokens }) })).json() as { content: string };
      expect(content.trimStart()).toBe(text);
    } finally {
      await server.stop();
    }
  });
});

test.each(WEIGHT_TYPES)("embed %s: /v1/embeddings returns one normalized vector per input", async (type) => {
  const server = await startLlamaServer(await testModel("embed", type), ["--embeddings", "--pooling", "mean"]);
  try {
    const res = await client(server.url).embeddings.create({ model: "test", input: ["hello world", "the mesh"] });
    expect(res.data).toHaveLength(2);
    for (const { embedding } of res.data) {
      expect(embedding).toHaveLength(64);
      const norm = Math.sqrt(embedding.reduce((s, x) => s + x * x, 0));
      expect(norm).toBeCloseTo(1, 3);
    }
    expect(res.data[0]!.embedding).not.toEqual(res.data[1]!.embedding);
  } finally {
    await server.stop();
  }
});

test.each(WEIGHT_TYPES)("rerank %s: /v1/rerank scores every document", async (type) => {
  const server = await startLlamaServer(await testModel("rerank", type), ["--reranking"]);
  try {
    const res = await fetch(`${server.url}/v1/rerank`, {
      method: "POST",
      body: JSON.stringify({ model: "test", query: "hello", documents: ["hello world", "the dog", "a mesh"] }),
    });
    const body = (await res.json()) as { results: { index: number; relevance_score: number }[] };
    expect(body.results.map((r) => r.index).sort()).toEqual([0, 1, 2]);
    for (const r of body.results) expect(Number.isFinite(r.relevance_score)).toBe(true);
  } finally {
    await server.stop();
  }
});
