/**
 * Tool calls through the mesh, in every dialect's official client, on the node that serves a model
 * whose chat template calls tools (the `tools` test model) and on one that forwards to it: a forced
 * call, whole and streamed (the call's deltas as each dialect streams them), then the tool's result
 * sent back and answered. The model has random weights; llama-server's own grammar for the
 * template's call format makes every forced call a valid one.
 */
import Anthropic from "@anthropic-ai/sdk";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Ollama, type Message as OllamaMessage, type Tool as OllamaTool } from "ollama";
import OpenAI from "openai";
import { killAllChildren } from "../../harness/children.ts";
import { hostAndEntry, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";

const MODEL = "tools-f32";
const nodes: MeshTestNode[] = [];
let host: MeshTestNode;
let entry: MeshTestNode;

beforeAll(async () => {
  ({ host, entry } = await hostAndEntry(MODEL, [...SMALL_LLAMA, "--model", await testModel("tools")], SMALL_LLAMA, nodes));
}, 120_000);
afterAll(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  await killAllChildren();
});

const CITIES = ["paris", "london"];
const PARAMETERS = { type: "object", properties: { city: { type: "string", enum: CITIES } }, required: ["city"], additionalProperties: false };
const DESCRIPTION = "The weather in a city";
/** Enough for the call's fixed text and the longest city; the grammar ends the call itself. */
const CALL_TOKENS = 64;
/** The answer after the tool's result: any text will do. */
const ANSWER_TOKENS = 4;
const GREEDY = { temperature: 0 } as const;
const ASK = "what is the weather in paris?";

/** The arguments a call carries, as the client gave them: JSON text (OpenAI) or an object (Anthropic, Ollama). */
function expectWeatherArgs(args: unknown): void {
  const parsed = typeof args === "string" ? (JSON.parse(args) as unknown) : args;
  expect(parsed).toEqual({ city: expect.stringMatching(/^(paris|london)$/) });
}

const through = [
  ["the serving node", () => host],
  ["a node that forwards", () => entry],
] as const;

describe.each(through)("through %s", (_, node) => {
  const openai = () => new OpenAI({ baseURL: `${node().url}/v1`, apiKey: "unused", maxRetries: 0 });

  test("/v1/models and /api/show say the model calls tools", async () => {
    const models = (await (await fetch(`${node().url}/v1/models`)).json()) as { data: { id: string; capabilities: string[]; labels: string[] }[] };
    expect(models.data.find((m) => m.id === MODEL)).toMatchObject({ capabilities: ["completion", "tools"], labels: expect.arrayContaining(["tool-calling"]) });
    expect((await new Ollama({ host: node().url }).show({ model: MODEL })).capabilities).toEqual(["completion", "tools"]);
  });

  describe("OpenAI chat completions", () => {
    const tools: OpenAI.ChatCompletionTool[] = [{ type: "function", function: { name: "get_weather", description: DESCRIPTION, parameters: PARAMETERS } }];

    test("a required call, its result sent back, and the answer", async () => {
      const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: ASK }];
      const first = await openai().chat.completions.create({ model: MODEL, messages, tools, tool_choice: "required", max_tokens: CALL_TOKENS, ...GREEDY });
      const choice = first.choices[0]!;
      expect(choice.finish_reason).toBe("tool_calls");
      const call = choice.message.tool_calls![0]!;
      expect(call.type).toBe("function");
      if (call.type !== "function") throw new Error("not a function call");
      expect(call.function.name).toBe("get_weather");
      expectWeatherArgs(call.function.arguments);
      expect(call.id).toBeTruthy();

      messages.push(choice.message, { role: "tool", tool_call_id: call.id, content: "sunny, 21 degrees" });
      const answer = await openai().chat.completions.create({ model: MODEL, messages, tools, tool_choice: "none", max_tokens: ANSWER_TOKENS, ...GREEDY });
      expect(answer.choices[0]!.message.tool_calls ?? []).toEqual([]);
      expect(typeof answer.choices[0]!.message.content).toBe("string");
      // The tool's result was in the prompt the model read.
      expect(answer.usage!.prompt_tokens).toBeGreaterThan(first.usage!.prompt_tokens);
    });

    test("a named function, streamed: the call's deltas put together by the SDK's stream helper", async () => {
      const stream = openai().chat.completions.stream({
        model: MODEL,
        messages: [{ role: "user", content: ASK }],
        tools,
        tool_choice: { type: "function", function: { name: "get_weather" } },
        max_tokens: CALL_TOKENS,
        ...GREEDY,
      });
      let argumentDeltas = 0;
      stream.on("tool_calls.function.arguments.delta", () => argumentDeltas++);
      const done = await stream.finalChatCompletion();
      const call = done.choices[0]!.message.tool_calls![0]!;
      if (call.type !== "function") throw new Error("not a function call");
      expect(call.function.name).toBe("get_weather");
      expectWeatherArgs(call.function.arguments);
      expect(argumentDeltas).toBeGreaterThan(0);
      expect(done.choices[0]!.finish_reason).toBe("tool_calls");
    });
  });

  describe("OpenAI Responses", () => {
    const tools: OpenAI.Responses.Tool[] = [{ type: "function", name: "get_weather", description: DESCRIPTION, parameters: PARAMETERS, strict: true }];

    test("a required call as a function_call item, its function_call_output sent back, and the answer", async () => {
      const first = await openai().responses.create({ model: MODEL, input: ASK, tools, tool_choice: "required", max_output_tokens: CALL_TOKENS, ...GREEDY });
      const call = first.output.find((item) => item.type === "function_call");
      expect(call).toBeDefined();
      if (call?.type !== "function_call") throw new Error("no function call");
      expect(call.name).toBe("get_weather");
      expectWeatherArgs(call.arguments);
      expect(call.call_id).toBeTruthy();

      const answer = await openai().responses.create({
        model: MODEL,
        input: [{ role: "user", content: ASK }, call, { type: "function_call_output", call_id: call.call_id, output: "sunny, 21 degrees" }],
        tools,
        tool_choice: "none",
        max_output_tokens: ANSWER_TOKENS,
        ...GREEDY,
      });
      expect(answer.status).toBe("incomplete" === answer.status ? "incomplete" : "completed");
      expect(answer.output.some((item) => item.type === "function_call")).toBe(false);
      expect(answer.usage!.input_tokens).toBeGreaterThan(first.usage!.input_tokens);
    });

    test("streamed: function_call_arguments deltas and the call in the final response", async () => {
      const stream = openai().responses.stream({ model: MODEL, input: ASK, tools, tool_choice: { type: "function", name: "get_weather" }, max_output_tokens: CALL_TOKENS, ...GREEDY });
      const types = new Set<string>();
      for await (const event of stream) types.add(event.type);
      const done = await stream.finalResponse();
      expect(types).toContain("response.function_call_arguments.delta");
      expect(types).toContain("response.function_call_arguments.done");
      const call = done.output.find((item) => item.type === "function_call");
      if (call?.type !== "function_call") throw new Error("no function call");
      expect(call.name).toBe("get_weather");
      expectWeatherArgs(call.arguments);
    });
  });

  describe("Ollama chat", () => {
    const ollama = () => new Ollama({ host: node().url });
    const tools: OllamaTool[] = [{ type: "function", function: { name: "get_weather", description: DESCRIPTION, parameters: PARAMETERS } }];
    // Ollama has no tool_choice: offered tools, the model calls one of its own accord.
    const CALL = { num_predict: CALL_TOKENS, ...GREEDY };

    test("a call (arguments an object), its result sent back by tool_name without tools, and the answer", async () => {
      const messages: OllamaMessage[] = [{ role: "user", content: ASK }];
      const first = await ollama().chat({ model: MODEL, messages, tools, stream: false, options: CALL });
      // Ollama's done_reason after a call is "stop".
      expect(first.done_reason).toBe("stop");
      expect(first.message.tool_calls).toHaveLength(1);
      const call = first.message.tool_calls![0]!;
      expect(call.function.name).toBe("get_weather");
      expect(typeof call.function.arguments).toBe("object");
      expectWeatherArgs(call.function.arguments);

      // The assistant message as it came back, and the result named by tool_name (Ollama's words).
      messages.push(first.message, { role: "tool", content: "sunny", tool_name: "get_weather" });
      const answer = await ollama().chat({ model: MODEL, messages, stream: false, options: { num_predict: ANSWER_TOKENS, ...GREEDY } });
      expect(answer.message.tool_calls ?? []).toEqual([]);
      expect(typeof answer.message.content).toBe("string");
      expect(["stop", "length"]).toContain(answer.done_reason);
      expect(answer.eval_count).toBeGreaterThan(0);
    });

    test("streamed: the call whole in a line of its own before the last, which says done", async () => {
      const lines = [];
      for await (const line of await ollama().chat({ model: MODEL, messages: [{ role: "user", content: ASK }], tools, stream: true, options: CALL })) lines.push(line);
      const last = lines.at(-1)!;
      expect(last.done).toBe(true);
      expect(last.done_reason).toBe("stop");
      const withCalls = lines.filter((l) => (l.message.tool_calls ?? []).length > 0);
      expect(withCalls).toHaveLength(1);
      expect(withCalls[0]!.done).toBe(false);
      const call = withCalls[0]!.message.tool_calls![0]!;
      expect(call.function.name).toBe("get_weather");
      expectWeatherArgs(call.function.arguments);
    });
  });

  describe("Anthropic messages", () => {
    const anthropic = () => new Anthropic({ baseURL: node().url, apiKey: "unused", maxRetries: 0 });
    const tools: Anthropic.Tool[] = [{ name: "get_weather", description: DESCRIPTION, input_schema: PARAMETERS as Anthropic.Tool.InputSchema }];

    test("tool_choice any: a tool_use block, its tool_result sent back, and the answer", async () => {
      const messages: Anthropic.MessageParam[] = [{ role: "user", content: ASK }];
      const first = await anthropic().messages.create({ model: MODEL, messages, tools, tool_choice: { type: "any" }, max_tokens: CALL_TOKENS, ...GREEDY });
      expect(first.stop_reason).toBe("tool_use");
      const use = first.content.find((block) => block.type === "tool_use");
      if (use?.type !== "tool_use") throw new Error("no tool_use block");
      expect(use.name).toBe("get_weather");
      expectWeatherArgs(use.input);

      messages.push({ role: "assistant", content: first.content }, { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "sunny, 21 degrees" }] });
      const answer = await anthropic().messages.create({ model: MODEL, messages, tools, tool_choice: { type: "none" }, max_tokens: ANSWER_TOKENS, ...GREEDY });
      expect(answer.content.some((block) => block.type === "tool_use")).toBe(false);
      // Tool choice none reaches llama-server as no tools at all (it would take none as auto): a text answer.
      expect(answer.stop_reason).not.toBe("tool_use");
      expect(answer.content.every((block) => block.type === "text")).toBe(true);
    });

    test("tool_choice tool, streamed: input_json_delta events and the input in the final message", async () => {
      const stream = anthropic().messages.stream({
        model: MODEL,
        messages: [{ role: "user", content: ASK }],
        tools,
        tool_choice: { type: "tool", name: "get_weather" },
        max_tokens: CALL_TOKENS,
        ...GREEDY,
      });
      const deltas: string[] = [];
      for await (const event of stream) if (event.type === "content_block_delta" && event.delta.type === "input_json_delta") deltas.push(event.delta.partial_json);
      const done = await stream.finalMessage();
      expect(deltas.length).toBeGreaterThan(0);
      expectWeatherArgs(deltas.join(""));
      const use = done.content.find((block) => block.type === "tool_use");
      if (use?.type !== "tool_use") throw new Error("no tool_use block");
      expectWeatherArgs(use.input);
      expect(done.stop_reason).toBe("tool_use");
    });
  });
});
