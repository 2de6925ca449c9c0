/**
 * Four places where llama-server answers a dialect almost right, found with real clients, through
 * the node that serves the model and one that forwards to it: legacy completions' logprobs and
 * echo (the openai client), Anthropic's stop reason on a stop sequence (the Anthropic SDK),
 * embeddings asked of a chat model (the openai and ollama clients), and a forced tool call for a
 * chat template without tool calling (the openai client and the Anthropic SDK).
 */
import Anthropic from "@anthropic-ai/sdk";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Ollama } from "ollama";
import OpenAI from "openai";
import { killAllChildren } from "../../harness/children.ts";
import { hostAndEntry, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { parseScrape, valueOf } from "../../harness/prometheus.ts";

const MODEL = "tiny-q8_0";
/** An embedding model on the host's disk: what the refusal names instead. */
const EMBED = "embed";
const KEY = "unused";
const nodes: MeshTestNode[] = [];
let host: MeshTestNode;
let entry: MeshTestNode;

beforeAll(async () => {
  ({ host, entry } = await hostAndEntry(MODEL, [...SMALL_LLAMA, "--model", await testModel("tiny", "q8_0")], SMALL_LLAMA, nodes, { models: { [`${EMBED}.gguf`]: await testModel("embed") } }));
}, 120_000);
afterAll(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  await killAllChildren();
});

const openai = (node: MeshTestNode) => new OpenAI({ baseURL: `${node.url}/v1`, apiKey: KEY, maxRetries: 0 });
const anthropic = (node: MeshTestNode) => new Anthropic({ baseURL: node.url, apiKey: KEY, maxRetries: 0 });
/** Greedy: the random-weight model gives the same tokens every run (this prompt gives three plain ASCII ones). */
const GREEDY = { temperature: 0, top_k: 1 } as const;
const PROMPT = "The";

interface Legacy {
  tokens: string[];
  token_logprobs: number[];
  top_logprobs: Record<string, number>[];
  text_offset: number[];
}

/** The legacy shape, whole: one entry per token, each token among its own top ones, offsets after the prompt and token by token. */
function expectLegacy(lp: Legacy, top: number, text: string, from: number): void {
  expect(Object.keys(lp).sort()).toEqual(["text_offset", "token_logprobs", "tokens", "top_logprobs"]);
  expect(lp.tokens.length).toBeGreaterThan(0);
  expect(lp.tokens.join("")).toBe(text);
  for (const [i, token] of lp.tokens.entries()) {
    expect(lp.token_logprobs[i]).toBeLessThanOrEqual(0);
    expect(lp.top_logprobs[i]![token]).toBe(lp.token_logprobs[i]!);
    expect(Object.keys(lp.top_logprobs[i]!).length).toBeLessThanOrEqual(top + 1);
    expect(lp.text_offset[i]).toBe(from + lp.tokens.slice(0, i).join("").length);
  }
}

describe.each([
  ["the serving node", () => host],
  ["a node that forwards", () => entry],
])("through %s", (_, node) => {
  test("completions with logprobs: the legacy shape, whole and streamed alike", async () => {
    const whole = await openai(node()).completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 3, logprobs: 2, ...GREEDY });
    const choice = whole.choices[0]!;
    expectLegacy(choice.logprobs as unknown as Legacy, 2, choice.text, PROMPT.length);
    expect(Object.values(choice.logprobs!.top_logprobs![0]!).length).toBeGreaterThanOrEqual(2);

    // 0: the sampled token's logprob alone (llama-server's own 0 gives none at all).
    const zero = await openai(node()).completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 3, logprobs: 0, ...GREEDY });
    const zeroLp = zero.choices[0]!.logprobs as unknown as Legacy;
    expectLegacy(zeroLp, 0, zero.choices[0]!.text, PROMPT.length);
    expect(zeroLp.top_logprobs.map((m) => Object.keys(m))).toEqual(zeroLp.tokens.map((t) => [t]));

    const stream = await openai(node()).completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 3, logprobs: 2, stream: true, ...GREEDY });
    const joined: Legacy = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
    let text = "";
    for await (const chunk of stream) {
      const c = chunk.choices[0]!;
      text += c.text;
      const lp = c.logprobs as unknown as Legacy | null;
      if (!lp) continue;
      expect(lp).not.toHaveProperty("content");
      for (const key of Object.keys(joined) as (keyof Legacy)[]) (joined[key] as unknown[]).push(...lp[key]);
    }
    expect(text).toBe(choice.text);
    expectLegacy(joined, 2, text, PROMPT.length);
    expect(joined).toEqual(choice.logprobs as unknown as Legacy);
  });

  test("completions with echo: the prompt before the text, whole and streamed", async () => {
    const plain = await openai(node()).completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 3, ...GREEDY });
    const echoed = await openai(node()).completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 3, echo: true, ...GREEDY });
    expect(plain.choices[0]!.text.startsWith(PROMPT)).toBe(false);
    expect(echoed.choices[0]!.text).toBe(PROMPT + plain.choices[0]!.text);
    let streamed = "";
    for await (const chunk of await openai(node()).completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 3, echo: true, stream: true, ...GREEDY })) streamed += chunk.choices[0]!.text;
    expect(streamed).toBe(echoed.choices[0]!.text);
  });

  test("completions with echo and logprobs: a 400 that says llama.cpp gives no prompt logprobs", async () => {
    const err = await openai(node()).completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 1, echo: true, logprobs: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as Error).message).toContain("llama.cpp's server gives them only for the tokens it generates");
  });

  test("messages with a stop sequence: stop_reason stop_sequence, whole and streamed", async () => {
    const messages: Anthropic.MessageParam[] = [{ role: "user", content: "hello there" }];
    const free = await anthropic(node()).messages.create({ model: MODEL, max_tokens: 12, messages, ...GREEDY });
    const text = free.content.map((b) => (b.type === "text" ? b.text : "")).join("");
    // A letter the greedy reply certainly writes, not at its very start.
    const at = text.split("").findIndex((ch, i) => i > 0 && /[a-z]/.test(ch) && text.indexOf(ch) === i);
    expect(at).toBeGreaterThan(0);
    const stop = text[at]!;

    const msg = await anthropic(node()).messages.create({ model: MODEL, max_tokens: 12, messages, stop_sequences: [stop], ...GREEDY });
    expect(msg.stop_reason).toBe("stop_sequence");
    expect(msg.stop_sequence).toBe(stop);
    const stopped = msg.content.map((b) => (b.type === "text" ? b.text : "")).join("");
    expect(text.startsWith(stopped)).toBe(true);
    expect(stopped).not.toContain(stop);

    const events: Anthropic.RawMessageStreamEvent[] = [];
    for await (const event of await anthropic(node()).messages.create({ model: MODEL, max_tokens: 12, messages, stop_sequences: [stop], stream: true, ...GREEDY })) events.push(event);
    const delta = events.find((e): e is Anthropic.RawMessageDeltaEvent => e.type === "message_delta");
    expect(delta?.delta).toMatchObject({ stop_reason: "stop_sequence", stop_sequence: stop });
    expect(events.at(-1)?.type).toBe("message_stop");

    // Without it, the same reply stops on its token limit, as before.
    expect(free.stop_reason).toBe("max_tokens");
  });

  test("embeddings of a chat model: a 400 naming the models that embed (openai and ollama clients)", async () => {
    const err = await openai(node()).embeddings.create({ model: MODEL, input: "x" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as Error).message).toContain(`model "${MODEL}" does not do embeddings (it is a llm model); models of the mesh that do: ${EMBED}`);
    const viaOllama = await new Ollama({ host: node().url }).embed({ model: MODEL, input: "x" }).catch((e: unknown) => e);
    expect(viaOllama).toMatchObject({ status_code: 400 });
    expect((viaOllama as Error).message).toContain("does not do embeddings");
  });

  test("a forced tool call for a template without tool calling: a 400 (openai client and Anthropic SDK)", async () => {
    const tools: OpenAI.ChatCompletionTool[] = [{ type: "function", function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } }];
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "weather in Paris?" }];
    const required = await openai(node()).chat.completions.create({ model: MODEL, max_tokens: 4, messages, tools, tool_choice: "required" }).catch((e: unknown) => e);
    expect(required).toBeInstanceOf(OpenAI.BadRequestError);
    expect((required as Error).message).toContain(`tool_choice "required" cannot be honoured: model "${MODEL}"'s chat template has no tool calling`);
    const named = await openai(node()).chat.completions.create({ model: MODEL, max_tokens: 4, messages, tools, tool_choice: { type: "function", function: { name: "get_weather" } }, stream: true }).catch((e: unknown) => e);
    expect(named).toBeInstanceOf(OpenAI.BadRequestError);
    // Not forced: answered, in text.
    const auto = await openai(node()).chat.completions.create({ model: MODEL, max_tokens: 4, messages, tools, tool_choice: "auto", ...GREEDY });
    expect(auto.choices[0]!.message.tool_calls ?? []).toEqual([]);

    const anthropicTools: Anthropic.Tool[] = [{ name: "get_weather", input_schema: { type: "object", properties: { city: { type: "string" } } } }];
    for (const tool_choice of [{ type: "any" }, { type: "tool", name: "get_weather" }] as const) {
      const err = await anthropic(node()).messages.create({ model: MODEL, max_tokens: 4, messages: [{ role: "user", content: "weather in Paris?" }], tools: anthropicTools, tool_choice }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(Anthropic.BadRequestError);
      const body = (err as InstanceType<typeof Anthropic.BadRequestError>).error as { error?: { message?: string } };
      expect(body.error?.message).toStartWith(`tool_choice ${JSON.stringify(tool_choice)} cannot be honoured: model "${MODEL}"'s chat template has no tool calling`);
    }
  });
});

test("the refusal of embeddings is given where the client called: the request never reaches the node serving the model", async () => {
  const count = async () => valueOf(parseScrape(await (await fetch(`${host.url}/metrics`)).text()), "mesh_requests_total", { route: "/v1/embeddings" });
  const before = await count();
  const err = await openai(entry).embeddings.create({ model: MODEL, input: "x" }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(OpenAI.BadRequestError);
  expect(await count()).toBe(before);
  // The embedding model itself still embeds.
  const ok = await openai(host).embeddings.create({ model: EMBED, input: "x" });
  expect(ok.data[0]!.embedding.length).toBeGreaterThan(0);
  expect(await count()).toBe(before + 1);
});
