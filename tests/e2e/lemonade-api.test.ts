/**
 * Lemonade parity, end to end on one node: the openai client with Lemonade's base URL (`/api/v1`)
 * lists models, chats (plain and streamed) and embeds; `/live`; `/api/v1/system-info`; a load
 * with `ctx_size: -1` gets the model's own context; management errors in Lemonade's shape, while
 * the OpenAI routes under `/api/v1` keep OpenAI's; pull and delete say they are not there yet;
 * `/api/v0` and `/v0` answer the same routes; a bodyless `POST /api/v1/unload` unloads everything.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { childProps, post, server } from "../../harness/api.ts";
import { killAllChildren } from "../../harness/children.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA, startNode, type TestNode } from "../../harness/node.ts";

let n: TestNode;
let ai: OpenAI;

beforeAll(async () => {
  n = await startNode([...SMALL_LLAMA, "--max-loaded-models", "2"], {
    models: { "chat.gguf": await testModel("tiny", "q8_0"), "embed.gguf": await testModel("embed", "q8_0") },
  });
  ai = new OpenAI({ baseURL: `${n.url}/api/v1`, apiKey: "unused", maxRetries: 0 });
});
afterAll(async () => {
  await n?.stop();
  await killAllChildren();
});

describe("the openai client with baseURL /api/v1", () => {
  test("lists and retrieves models", async () => {
    const ids = [];
    for await (const m of ai.models.list()) ids.push(m.id);
    expect(ids.sort()).toEqual(["chat", "embed"]);
    expect((await ai.models.retrieve("chat")).id).toBe("chat");
  });

  test("chat completion, plain and streamed", async () => {
    const res = await ai.chat.completions.create({ model: "chat", messages: [{ role: "user", content: "hello" }], max_tokens: 3, temperature: 0 });
    expect(res.model).toBe("chat");
    expect(res.usage!.completion_tokens).toBeGreaterThan(0);
    const stream = await ai.chat.completions.create({ model: "chat", messages: [{ role: "user", content: "hi" }], max_tokens: 4, stream: true, ignore_eos: true } as OpenAI.ChatCompletionCreateParamsStreaming);
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe("length");
  });

  test("embeddings", async () => {
    const res = await ai.embeddings.create({ model: "embed", input: ["a", "b"] });
    expect(res.data.map((d) => d.embedding.length)).toEqual([64, 64]);
  });

  test("errors on these routes stay OpenAI's", async () => {
    const thrown = await ai.chat.completions.create({ model: "gpt-9", messages: [{ role: "user", content: "x" }] }).catch((e: unknown) => e);
    expect(thrown).toBeInstanceOf(OpenAI.NotFoundError);
    expect((thrown as InstanceType<typeof OpenAI.NotFoundError>).code).toBe("model_not_found");
  });

  test("the browser guard holds there too: a POST that is not JSON is refused", async () => {
    const res = await fetch(`${n.url}/api/v1/chat/completions`, { method: "POST", headers: { "content-type": "text/plain" }, body: JSON.stringify({ model: "chat", messages: [] }) });
    expect(res.status).toBe(415);
  });

  test("are counted in the metrics under their /v1 route", async () => {
    const text = await (await fetch(`${n.url}/metrics`)).text();
    // Every chat of this file came through /api/v1.
    expect(text).toMatch(/^mesh_requests_total\{model="chat",route="\/v1\/chat\/completions",status="200"\} [1-9]/m);
  });
});

test("GET and HEAD /live answer ok", async () => {
  const res = await fetch(`${n.url}/live`);
  expect(res.status).toBe(200);
  expect(await res.json()).toEqual({ status: "ok" });
  expect((await fetch(`${n.url}/live`, { method: "HEAD" })).status).toBe(200);
});

test("/api/v1/system-info in Lemonade's shape", async () => {
  const info = (await (await fetch(`${n.url}/api/v1/system-info`)).json()) as Record<string, unknown> & {
    devices: { cpu: Record<string, unknown> };
    recipes: { llamacpp: { default_backend: string; backends: Record<string, { devices: string[]; state: string; message: string; action: string }> } };
    memory: { total_bytes: number; free_bytes: number };
  };
  expect(info["OS Version"]).toMatch(/^Linux-/);
  expect(typeof info.Processor).toBe("string");
  expect(info["Physical Memory"]).toMatch(/^\d+\.\d GB$/);
  expect(info.memory.total_bytes).toBeGreaterThan(info.memory.free_bytes);
  expect(info.devices.cpu).toMatchObject({ available: true, threads: expect.any(Number) });
  // The test build is CPU-only: the CPU is the one backend.
  expect(info.recipes.llamacpp).toEqual({ default_backend: "cpu", backends: { cpu: { devices: ["cpu"], state: "installed", message: "", action: "" } } });
});

test("load with ctx_size -1 gets the model's own context (2048, not the node's 512)", async () => {
  const res = await post(n, "/api/v1/load", { model_name: "chat", ctx_size: -1 });
  expect(res.status).toBe(200);
  expect(await res.json()).toMatchObject({ status: "success", model_name: "chat" });
  const props = await childProps(n, await server(n, "chat"));
  expect(props.default_generation_settings.n_ctx).toBe(2048);
  const health = (await (await fetch(`${n.url}/api/v1/health`)).json()) as {
    pinned_models: Record<string, number>;
    all_models_loaded: { model_name: string; recipe_options: Record<string, unknown> }[];
  };
  expect(health.pinned_models).toMatchObject({ llm: 0, embedding: 0 });
  // What the load ran with, as Lemonade reports it: 0 is llama-server's "the model's own".
  expect(health.all_models_loaded.find((m) => m.model_name === "chat")!.recipe_options).toEqual({ ctx_size: 0 });
});

describe("management errors are Lemonade's {status: error, message} (with OpenAI's error beside)", () => {
  const body = async (res: Response) => (await res.json()) as { status: string; message: string; error: { code: string; message: string } };

  test.each([
    ["an unknown model", { model_name: "nope" }, 404, "model_not_found", 'model "nope" is not known'],
    ["a bad ctx_size", { model_name: "chat", ctx_size: -2 }, 400, "invalid_body", "ctx_size"],
    ["a clashing llamacpp_args", { model_name: "chat", llamacpp_args: "--port 1" }, 400, "invalid_llamacpp_args", "--port"],
  ])("load with %s", async (_, req, status, code, says) => {
    const res = await post(n, "/api/v1/load", req);
    expect(res.status).toBe(status);
    const b = await body(res);
    expect(b).toMatchObject({ status: "error", error: { code, message: b.message } });
    expect(b.message).toContain(says);
  });

  // Pulls and deletes that work: pull-api.test.ts.
  test.each([
    ["/api/v1/pull", { model_name: "chat" }, 400, "bad_reference", "is not a model reference"],
    ["/api/v1/delete", { model_name: "nope" }, 404, "model_not_found", 'model "nope" is not on this node'],
  ] as const)("%s: what cannot be done, and why", async (path, req, status, code, says) => {
    const res = await post(n, path, req);
    expect(res.status).toBe(status);
    const b = await body(res);
    expect(b).toMatchObject({ status: "error", error: { code } });
    expect(b.message).toContain(says);
  });

  test("an unknown management route", async () => {
    const res = await post(n, "/api/v1/log-level", { level: "debug" });
    expect(res.status).toBe(404);
    expect((await body(res)).status).toBe("error");
  });

  test.each<[string, string, string]>([
    ["GET", "/api/v1/load", "POST"],
    ["POST", "/api/v1/health", "GET, HEAD"],
    ["GET", "/api/v1/chat/completions", "POST"],
    ["DELETE", "/api/v1/models", "GET, HEAD"],
  ])("%s %s: 405 with Allow %p", async (method, path, allow) => {
    const res = await fetch(`${n.url}${path}`, { method, headers: { "content-type": "application/json" } });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe(allow);
    expect(await body(res)).toMatchObject({ status: "error", error: { code: "method_not_allowed" } });
  });
});

describe("Lemonade's other base URLs: /api/v0 and /v0 answer as /api/v1 does", () => {
  test.each(["/api/v0", "/v0"])("%s: the openai client lists and chats; health, a 405 and a 404 in Lemonade's shape", async (base) => {
    const client = new OpenAI({ baseURL: `${n.url}${base}`, apiKey: "unused", maxRetries: 0 });
    const ids = [];
    for await (const m of client.models.list()) ids.push(m.id);
    expect(ids.sort()).toEqual(["chat", "embed"]);
    const res = await client.chat.completions.create({ model: "chat", messages: [{ role: "user", content: "hello" }], max_tokens: 2, temperature: 0 });
    expect(res.usage!.completion_tokens).toBeGreaterThan(0);
    const health = await fetch(`${n.url}${base}/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ status: "ok", all_models_loaded: expect.any(Array) });
    const wrong = await fetch(`${n.url}${base}/load`, { method: "GET" });
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get("allow")).toBe("POST");
    expect(await wrong.json()).toMatchObject({ status: "error", error: { code: "method_not_allowed" } });
    const missing = await post(n, `${base}/log-level`, { level: "debug" });
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ status: "error" });
  });
});

test("a bodyless POST /api/v1/unload unloads every model, pinned ones too; a page cannot send one", async () => {
  const loadedNames = async () => ((await (await fetch(`${n.url}/api/v1/health`)).json()) as { all_models_loaded: { model_name: string }[] }).all_models_loaded.map((m) => m.model_name).sort();
  expect((await post(n, "/api/v1/load", { model_name: "chat", pinned: true })).status).toBe(200);
  expect((await post(n, "/api/v1/load", { model_name: "embed" })).status).toBe(200);
  expect(await loadedNames()).toEqual(["chat", "embed"]);

  // A page's bodyless POST carries its Origin: refused, nothing unloaded.
  const page = await fetch(`${n.url}/api/v1/unload`, { method: "POST", headers: { origin: "https://evil.example" } });
  expect(page.status).toBe(403);
  // A body that is not JSON still needs the type.
  expect((await fetch(`${n.url}/api/v1/unload`, { method: "POST", body: "model_name=chat" })).status).toBe(415);
  expect(await loadedNames()).toEqual(["chat", "embed"]);

  // `curl -X POST .../api/v1/unload`: no body, no type.
  const all = await fetch(`${n.url}/api/v1/unload`, { method: "POST" });
  expect(all.status).toBe(200);
  expect(((await all.json()) as { unloaded: string[] }).unloaded.sort()).toEqual(["chat", "embed"]);
  expect(await loadedNames()).toEqual([]);

  // An empty JSON body under /v0 is the same request.
  expect((await post(n, "/api/v1/load", { model_name: "chat" })).status).toBe(200);
  const empty = await post(n, "/v0/unload", "");
  expect(empty.status).toBe(200);
  expect(await empty.json()).toMatchObject({ status: "success", unloaded: ["chat"] });
  expect(await loadedNames()).toEqual([]);
});
