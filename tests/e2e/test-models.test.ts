/**
 * Every test model loads in the real llama-server and does its job: chat and text completions
 * through the `openai` client for generative models, embeddings for the embedding model, and a
 * tokenizer that round-trips text.
 */
import { afterAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { killAllChildren } from "../../harness/children.ts";
import { startLlamaServer } from "../../harness/llama.ts";
import { testModel, testProjector } from "../../harness/models.ts";
import { gradientPng, pngDataUrl } from "../../harness/png.ts";
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

describe("vision", () => {
  test.each(WEIGHT_TYPES)("%s: with its projector, an image in a chat becomes image tokens in the prompt", async (type) => {
    const model = await testModel("vision", type);
    const server = await startLlamaServer(model, ["--mmproj", testProjector(model)]);
    try {
      const props = (await (await fetch(`${server.url}/props`)).json()) as { modalities: { vision: boolean } };
      expect(props.modalities.vision).toBe(true);
      const ai = client(server.url);
      const ask = (image?: string) =>
        ai.chat.completions.create({
          model: "test",
          messages: [{
            role: "user",
            content: [{ type: "text", text: "what is this" }, ...(image ? [{ type: "image_url" as const, image_url: { url: image } }] : [])],
          }],
          max_tokens: 4,
          temperature: 0,
        });
      const text = await ask();
      const image = await ask(pngDataUrl(gradientPng(64, 48)));
      // The projector sees a 48x48 image in 8x8 patches: 36 tokens, whatever the PNG's size.
      expect(image.usage!.prompt_tokens - text.usage!.prompt_tokens).toBe(36);
      expect(typeof image.choices[0]!.message.content).toBe("string");
    } finally {
      await server.stop();
    }
  });
});

describe("tools", () => {
  const weather = {
    type: "function" as const,
    function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string", enum: ["paris", "london"] } }, required: ["city"] } },
  };
  const user = { role: "user" as const, content: "weather in paris?" };
  const called = { role: "assistant" as const, content: null, tool_calls: [{ id: "call_1", type: "function" as const, function: { name: "get_weather", arguments: '{"city":"paris"}' } }] };
  const answered = [user, called, { role: "tool" as const, tool_call_id: "call_1", content: "sunny" }];
  const caps = async (url: string) => ((await (await fetch(`${url}/props`)).json()) as { chat_template_caps: Record<string, boolean> }).chat_template_caps;

  test("llama-server reads the template as tool-calling, renders a tool result, and answers with tools offered", async () => {
    const server = await startLlamaServer(await testModel("tools"), ["--ctx-size", "1024"]);
    try {
      expect(await caps(server.url)).toMatchObject({ supports_tools: true, supports_tool_calls: true });
      const applied = await (await fetch(`${server.url}/apply-template`, { method: "POST", body: JSON.stringify({ messages: answered, tools: [weather] }) })).json() as { prompt: string };
      expect(applied.prompt).toContain('<tools>\n{"type": "function", "function": {"name": "get_weather"');
      expect(applied.prompt).toContain('<tool_call>{"name": "get_weather", "arguments": {"city": "paris"}}</tool_call><|im_end|>');
      expect(applied.prompt).toEndWith("<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n<|im_start|>assistant\n");

      const ai = client(server.url);
      for (const tool_choice of ["auto", "none"] as const) {
        for (const messages of [[user], answered]) {
          const chat = await ai.chat.completions.create({ model: "test", messages, tools: [weather], tool_choice, max_tokens: 8, temperature: 0 });
          expect(chat.choices[0]!.message.role).toBe("assistant");
        }
      }
    } finally {
      await server.stop();
    }
  });

  test("the plain ChatML model does not claim tool calls", async () => {
    const server = await startLlamaServer(await testModel("tiny"));
    try {
      expect(await caps(server.url)).toMatchObject({ supports_tools: false, supports_tool_calls: false });
    } finally {
      await server.stop();
    }
  });

  // The tools model is programmed to call (TOOL_CALL_BIGRAMS in scripts/test-model/llama-model.ts):
  // after the generation prompt it writes "<tool_call>", llama-server's grammar fills in the JSON of
  // the schema, and it ends its turn after "</tool_call>". No prefill, no stop: 54 or 55 tokens.
  const CALL_TOKENS = 64;
  const weatherArgs = { city: expect.stringMatching(/^(paris|london)$/) };

  test("offered tools it calls one, forced or not, whole and streamed; given the result it writes text", async () => {
    const server = await startLlamaServer(await testModel("tools"), ["--ctx-size", "1024"]);
    try {
      const ai = client(server.url);
      const ask = { model: "test", tools: [weather], max_tokens: CALL_TOKENS, temperature: 0 };
      // "required", "auto", and none given (all that an Ollama client can send).
      for (const choice of [{ tool_choice: "required" as const }, { tool_choice: "auto" as const }, {}]) {
        const chat = await ai.chat.completions.create({ ...ask, ...choice, messages: [user] });
        const { finish_reason, message } = chat.choices[0]!;
        expect(finish_reason).toBe("tool_calls");
        expect(message.content ?? "").toBe("");
        expect(message.tool_calls).toHaveLength(1);
        const call = message.tool_calls![0]! as { id: string; type: string; function: { name: string; arguments: string } };
        expect(call.type).toBe("function");
        expect(call.id).toBeTruthy();
        expect(call.function.name).toBe("get_weather");
        expect(JSON.parse(call.function.arguments)).toEqual(weatherArgs);
        expect(chat.usage!.completion_tokens).toBeLessThan(CALL_TOKENS);

        let name = "";
        let args = "";
        let content = "";
        let finish: string | null = null;
        const indices = new Set<number>();
        for await (const chunk of await ai.chat.completions.create({ ...ask, ...choice, messages: [user], stream: true })) {
          content += chunk.choices[0]?.delta.content ?? "";
          for (const delta of chunk.choices[0]?.delta.tool_calls ?? []) {
            indices.add(delta.index);
            name += delta.function?.name ?? "";
            args += delta.function?.arguments ?? "";
          }
          finish = chunk.choices[0]?.finish_reason ?? finish;
        }
        expect([...indices]).toEqual([0]);
        expect(name).toBe("get_weather");
        expect(args).toBe(call.function.arguments);
        expect(content).toBe("");
        expect(finish).toBe("tool_calls");
      }

      // With the result: "none", or no tools at all, gives text and no call. Without a grammar the
      // same bigrams write a stub of a call as plain text and end the turn.
      for (const choice of [{ tools: [weather], tool_choice: "none" as const }, {}]) {
        const chat = await ai.chat.completions.create({ model: "test", messages: answered, max_tokens: CALL_TOKENS, temperature: 0, ...choice });
        const { finish_reason, message } = chat.choices[0]!;
        expect(message.tool_calls ?? []).toEqual([]);
        expect(message.content).toBe('<tool_call>{"}</tool_call>');
        expect(finish_reason).toBe("stop");
      }
      // "auto" calls again: this model always wants to.
      const again = await ai.chat.completions.create({ ...ask, tool_choice: "auto", messages: answered });
      expect(again.choices[0]!.finish_reason).toBe("tool_calls");
      expect(again.choices[0]!.message.tool_calls).toHaveLength(1);
    } finally {
      await server.stop();
    }
  });
});
