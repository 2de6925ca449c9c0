/**
 * The OpenAI-compatible API of one node, end to end: the official `openai` client for chat (plain
 * and streaming) and embeddings, reranking, the model list, and every error a client can cause.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { loadedNames, post, server, startStream } from "../../harness/api.ts";
import { killAllChildren } from "../../harness/children.ts";
import { frozen } from "../../harness/freeze.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA, startNode, type TestNode } from "../../harness/node.ts";
import { waitFor } from "../../harness/wait.ts";

let n: TestNode;
let ai: OpenAI;

beforeAll(async () => {
  n = await startNode([...SMALL_LLAMA, "--max-loaded-models", "1", "--load-timeout", "1s", "--max-body-size", "64KiB"], {
    models: {
      "chat.gguf": await testModel("tiny", "q8_0"),
      "other.gguf": await testModel("tiny", "f32"),
      "embed.gguf": await testModel("embed", "q8_0"),
      "rank.gguf": await testModel("rerank", "q8_0"),
    },
  });
  ai = new OpenAI({ baseURL: `${n.url}/v1`, apiKey: "unused", maxRetries: 0 });
});
afterAll(async () => {
  await n?.stop();
  await killAllChildren();
});

describe("the openai client", () => {
  test("chat completion", async () => {
    const res = await ai.chat.completions.create({ model: "chat", messages: [{ role: "user", content: "hello world" }], max_tokens: 4, temperature: 0 });
    expect(res.model).toBe("chat");
    expect(res.choices[0]!.message.role).toBe("assistant");
    expect(res.usage!.completion_tokens).toBeGreaterThan(0);
  });

  test("streaming chat completion, chunk by chunk", async () => {
    // ignore_eos is llama.cpp's: all 6 tokens get generated whatever the random weights say. A token
    // that is part of a UTF-8 character waits for the rest: tokens are counted by the usage, not by chunks.
    const params = { model: "chat", messages: [{ role: "user" as const, content: "hello" }], max_tokens: 6, stream: true as const, ignore_eos: true, stream_options: { include_usage: true } };
    const stream = await ai.chat.completions.create(params);
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.filter((c) => c.choices[0]?.delta.content).length).toBeGreaterThan(1);
    expect(chunks.findLast((c) => c.choices.length > 0)!.choices[0]!.finish_reason).toBe("length");
    expect(chunks.at(-1)!.usage!.completion_tokens).toBe(6);
    const stats = (await (await fetch(`${n.url}/api/v1/stats`)).json()) as { output_tokens: number; route: string };
    expect(stats).toMatchObject({ output_tokens: 6, route: "/v1/chat/completions" });
  });

  test("embeddings", async () => {
    const res = await ai.embeddings.create({ model: "embed", input: ["a", "b c"] });
    expect(res.data.map((d) => d.embedding.length)).toEqual([64, 64]);
  });
});

test("rerank (and /v1/reranking) go to a reranking server", async () => {
  for (const path of ["/v1/rerank", "/v1/reranking"]) {
    const res = await post(n, path, { model: "rank", query: "hello", documents: ["hello world", "dog"] });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { results: unknown[] }).results).toHaveLength(2);
  }
  expect((await server(n, "rank")).type).toBe("reranking");
});

test("GET /v1/models lists every model with type and status", async () => {
  const list = await ai.models.list();
  const byId = Object.fromEntries(list.data.map((m) => [m.id, m as unknown as { type: string; status: string }]));
  expect(Object.keys(byId).sort()).toEqual(["chat", "embed", "other", "rank"]);
  expect(byId.embed!.type).toBe("embedding");
  expect(byId.rank!.type).toBe("reranking");
  expect(byId.chat!.type).toBe("llm");
  expect(byId.other!.status).toBe("unloaded");
  const one = await ai.models.retrieve("chat");
  expect(one.id).toBe("chat");
});

describe("errors are OpenAI-shaped (Lemonade-shaped on management routes) and say what to do", () => {
  const error = async (res: Response) => ((await res.json()) as { error: { message: string; type: string; code: string } }).error;

  test("400 for malformed JSON and a missing model", async () => {
    const bad = await post(n, "/v1/chat/completions", "{not json");
    expect(bad.status).toBe(400);
    expect((await error(bad)).message).toContain("not valid JSON");
    const missing = await post(n, "/v1/embeddings", { input: "x" });
    expect(missing.status).toBe(400);
    expect((await error(missing)).message).toContain('needs a "model"');
  });

  test("404 for an unknown model, naming the known ones (also through the openai client)", async () => {
    const res = await post(n, "/v1/chat/completions", { model: "gpt-9", messages: [] });
    expect(res.status).toBe(404);
    expect(await error(res)).toMatchObject({ type: "not_found_error", code: "model_not_found", message: expect.stringContaining(": chat, embed, other, rank") });
    const thrown = await ai.chat.completions.create({ model: "gpt-9", messages: [{ role: "user", content: "x" }] }).catch((e: unknown) => e);
    expect(thrown).toBeInstanceOf(OpenAI.NotFoundError);
  });

  test("413 for a body over --max-body-size", async () => {
    const res = await post(n, "/v1/chat/completions", { model: "chat", messages: [{ role: "user", content: "x".repeat(100_000) }] });
    expect(res.status).toBe(413);
    expect((await error(res)).code).toBe("body_too_large");
    // Without a Content-Length (chunked), the limit holds while the body streams in.
    const big = new TextEncoder().encode(JSON.stringify({ model: "chat", prompt: "y".repeat(100_000) }));
    const chunked = new ReadableStream({
      start(c) {
        for (let i = 0; i < big.length; i += 8192) c.enqueue(big.subarray(i, i + 8192));
        c.close();
      },
    });
    const streamed = await fetch(`${n.url}/v1/completions`, { method: "POST", body: chunked });
    expect(streamed.status).toBe(413);
    expect((await error(streamed)).code).toBe("body_too_large");
  });

  test("503 with Retry-After when a load cannot start in time", async () => {
    const held = await frozen(n, "chat");
    try {
      const stream = startStream(n, "chat", 4);
      await waitFor(async () => (await server(n, "chat")).is_busy, { what: "the stream to hold chat" });
      const res = await post(n, "/v1/chat/completions", { model: "other", messages: [{ role: "user", content: "x" }], max_tokens: 1 });
      expect(res.status).toBe(503);
      expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
      expect((await error(res)).code).toBe("model_load_timeout");
      held.thaw();
      expect(await (await stream).text()).toContain("[DONE]");
      expect(await loadedNames(n)).toContain("chat");
    } finally {
      held.thaw();
    }
  });

  /** Management errors are Lemonade's `{status: "error", message}`, OpenAI's `error` beside them. */
  const lemonade = async (res: Response) => {
    const body = (await res.json()) as { status: string; message: string; error: { message: string; code: string } };
    expect(body.status).toBe("error");
    expect(body.error.message).toBe(body.message);
    return body;
  };

  test("400 for llamacpp_args that clash with the pool's flags, and for an unknown backend", async () => {
    const clash = await post(n, "/api/v1/load", { model_name: "other", llamacpp_args: "--port 8080" });
    expect(clash.status).toBe(400);
    expect((await lemonade(clash)).message).toContain("llamacpp_args may not contain --port");
    const backend = await post(n, "/api/v1/load", { model_name: "other", llamacpp_backend: "cuda" });
    expect(backend.status).toBe(400);
    expect((await lemonade(backend)).message).toContain('"cuda" is not available on this node; available: cpu');
  });

  test("404 for unloading a model that is not loaded; 400 for a bad load request", async () => {
    const res = await post(n, "/api/v1/unload", { model_name: "other" });
    expect(res.status).toBe(404);
    expect((await lemonade(res)).message).toContain("other");
    const bad = await post(n, "/api/v1/load", { model_name: 3 });
    expect(bad.status).toBe(400);
    expect((await lemonade(bad)).message).toContain("model_name");
  });

  test("404 for an unknown route", async () => {
    const res = await fetch(`${n.url}/v1/audio/speech`);
    expect(res.status).toBe(404);
    expect((await error(res)).type).toBe("not_found_error");
  });
});

test("/api/v1/health reports the loaded servers the way Lemonade does", async () => {
  const res = await fetch(`${n.url}/api/v1/health`);
  const h = (await res.json()) as Record<string, unknown> & { all_models_loaded: Record<string, unknown>[] };
  expect(h).toMatchObject({ status: "ok", max_models: { llm: 1, embedding: 1, reranking: 1, audio: 1, image: 1 }, pinned_models: { llm: 0, embedding: 0 } });
  expect(typeof h.model_loaded).toBe("string");
  for (const s of h.all_models_loaded) {
    expect(Object.keys(s)).toEqual(expect.arrayContaining(["model_name", "checkpoint", "last_use", "type", "device", "recipe", "pinned", "is_busy", "backend_url", "pid"]));
  }
});
