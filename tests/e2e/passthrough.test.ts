/**
 * Routes around inference, on the node that serves the model and on one that forwards to it: a
 * Responses stream whose final event is over 4 KiB ends cleanly; llama-server's `/tokenize`,
 * `/detokenize` and `/apply-template` by model; 405 with `Allow` for a wrong method; the entry
 * node's `/api/v1/stats` for a request it forwarded; a load there of a model only a peer has.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { post } from "../../harness/api.ts";
import { killAllChildren } from "../../harness/children.ts";
import { hostAndEntry, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { waitFor } from "../../harness/wait.ts";

const MODEL = "tiny-q8_0";
const nodes: MeshTestNode[] = [];
let host: MeshTestNode;
let entry: MeshTestNode;

beforeAll(async () => {
  ({ host, entry } = await hostAndEntry(
    MODEL,
    // Room for a long answer: its completed event repeats it whole.
    [...SMALL_LLAMA, "--ctx-size", "4096", "--model", await testModel("tiny", "q8_0")],
    // Lends compute only: it never gets the model's file, so it forwards and cannot load it.
    [...SMALL_LLAMA, "--fetch", "off"],
    nodes,
  ));
}, 120_000);
afterAll(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  await killAllChildren();
});

describe.each([
  ["the serving node", () => host],
  ["a node that forwards", () => entry],
])("through %s", (_, node) => {
  test("a Responses stream whose response.completed is over 4 KiB ends cleanly", async () => {
    const ai = new OpenAI({ baseURL: `${node().url}/v1`, apiKey: "unused", maxRetries: 0 });
    const stream = await ai.responses.create({ model: MODEL, input: "hi", max_output_tokens: 1500, temperature: 0, stream: true });
    const events: { type: string }[] = [];
    for await (const event of stream) events.push(event);
    const last = events.at(-1)!;
    expect(last.type).toBe("response.completed");
    expect(JSON.stringify(last).length).toBeGreaterThan(4096);
    expect(events.some((e) => e.type === "error" || JSON.stringify(e).includes("model_server_exited"))).toBe(false);
  });

  test("/tokenize, /detokenize and /apply-template by model", async () => {
    const tokens = ((await (await post(node(), "/tokenize", { model: MODEL, content: "hello world" })).json()) as { tokens: number[] }).tokens;
    expect(tokens.length).toBeGreaterThan(0);
    const res = await post(node(), "/detokenize", { model: MODEL, tokens });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { content: string }).content).toContain("hello");
    const tpl = await post(node(), "/apply-template", { model: MODEL, messages: [{ role: "user", content: "hi" }] });
    expect(((await tpl.json()) as { prompt: string }).prompt).toContain("hi");
    expect((await post(node(), "/tokenize", { content: "x" })).status).toBe(400);
  });

  test.each<[string, string, number, string | null]>([
    ["GET", "/v1/chat/completions", 405, "POST"],
    ["GET", "/v1/messages/count_tokens", 405, "POST"],
    ["GET", "/tokenize", 405, "POST"],
    ["POST", "/v1/models", 405, "GET, HEAD"],
    ["POST", "/health", 405, "GET, HEAD"],
    ["GET", "/v1/nope", 404, null],
    ["GET", "/nope", 404, null],
  ])("%s %s: %d", async (method, path, status, allow) => {
    const res = await fetch(`${node().url}${path}`, { method });
    expect(res.status).toBe(status);
    expect(res.headers.get("allow")).toBe(allow);
    const body = (await res.json()) as { error: { type: string; code: string; message: string } };
    expect(body.error.code).toBe(status === 405 ? "method_not_allowed" : "not_found");
  });
});

test("the entry node's /api/v1/stats tells the request it forwarded, plain and streamed", async () => {
  const ai = new OpenAI({ baseURL: `${entry.url}/v1`, apiKey: "unused", maxRetries: 0 });
  const chat = await ai.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hello" }], max_tokens: 3 });
  const plain = (await (await fetch(`${entry.url}/api/v1/stats`)).json()) as Record<string, unknown>;
  expect(plain).toMatchObject({ model: MODEL, route: "/v1/chat/completions", input_tokens: chat.usage!.prompt_tokens, output_tokens: chat.usage!.completion_tokens });
  for await (const _ of await ai.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 5, stream: true, ignore_eos: true } as OpenAI.ChatCompletionCreateParamsStreaming)) void _;
  const streamed = await waitFor(async () => {
    const s = (await (await fetch(`${entry.url}/api/v1/stats`)).json()) as Record<string, unknown>;
    return s.output_tokens === 5 ? s : undefined;
  }, { what: "the streamed request's stats on the entry node", timeoutMs: 5_000 });
  expect(streamed.time_to_first_token).not.toBeNull();
});

test("a load on the entry node of a model only its peer has: 409 naming the peer; the 404 list names only what it can load", async () => {
  const res = await post(entry, "/api/v1/load", { model_name: MODEL });
  expect(res.status).toBe(409);
  const { error } = (await res.json()) as { error: { message: string; code: string } };
  expect(error.code).toBe("model_not_on_this_node");
  expect(error.message).toContain(`the mesh serves it on node ${host.nodeId.slice(0, 10)}`);
  expect(error.message).toContain("--join");
  const missing = await post(entry, "/api/v1/load", { model_name: "nowhere" });
  expect(missing.status).toBe(404);
  const text = ((await missing.json()) as { error: { message: string } }).error.message;
  expect(text).toContain("it can load: none");
  expect(text).not.toContain(MODEL);
});
