/**
 * Tool calls in the client libraries users build on, beyond the vendors' SDKs (those are in
 * tools-clients.test.ts), on the node that serves the `tools` test model and on one that forwards
 * to it: the Vercel AI SDK with its OpenAI-compatible provider (`/v1`) and its Ollama provider
 * (`/api`), a required call whole and streamed, then the tool's result sent back and answered; and
 * LangChain's ChatOllama, a bound tool's call, its result, and structured output by function
 * calling. The model calls a tool whenever it is offered one (Ollama has no tool_choice, and
 * ChatOllama takes none), and llama-server's grammar makes every call a valid one.
 */
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { AIMessage, HumanMessage, ToolMessage } from "@langchain/core/messages";
import { tool as langchainTool } from "@langchain/core/tools";
import { ChatOllama } from "@langchain/ollama";
import { generateText, streamText, tool, type LanguageModel } from "ai";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createOllama } from "ollama-ai-provider-v2";
import { z } from "zod";
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

const DESCRIPTION = "The weather in a city";
const City = z.object({ city: z.enum(["paris", "london"]) });
/** Enough for the call's fixed text and the longest city; the grammar ends the call itself. */
const CALL_TOKENS = 64;
const ASK = "what is the weather in paris?";
const weather = tool({ description: DESCRIPTION, inputSchema: City, execute: async () => "sunny" });
const CALL = { tools: { get_weather: weather }, toolChoice: "required", maxOutputTokens: CALL_TOKENS, temperature: 0, maxRetries: 0 } as const;

const expectCity = (input: unknown) => expect(input).toEqual({ city: expect.stringMatching(/^(paris|london)$/) });
const bodyOf = (body: unknown): Record<string, unknown> => (typeof body === "string" ? (JSON.parse(body) as Record<string, unknown>) : (body as Record<string, unknown>));

describe.each([
  ["the serving node", () => host],
  ["a node that forwards", () => entry],
])("through %s", (_, node) => {
  const providers: [string, () => LanguageModel][] = [
    ["OpenAI-compatible provider", () => createOpenAICompatible({ name: "mesh", baseURL: `${node().url}/v1`, includeUsage: true })(MODEL)],
    ["Ollama provider", () => createOllama({ baseURL: `${node().url}/api` })(MODEL)],
  ];

  describe.each(providers)("Vercel AI SDK, %s", (_, model) => {
    test("generateText: a required call, the tool's result sent back, and the answer", async () => {
      const first = await generateText({ model: model(), prompt: ASK, ...CALL });
      expect(first.toolCalls).toHaveLength(1);
      const call = first.toolCalls[0]!;
      expect(call.toolName).toBe("get_weather");
      expectCity(call.input);
      expect(first.toolResults[0]?.output).toBe("sunny");
      expect(first.finishReason).toBe("tool-calls");

      // The call and its result as the SDK keeps them, sent back without tools: a text answer.
      const answer = await generateText({ model: model(), messages: [{ role: "user", content: ASK }, ...first.response.messages], maxOutputTokens: 4, temperature: 0, maxRetries: 0, include: { requestBody: true } });
      expect(answer.toolCalls).toEqual([]);
      expect(typeof answer.text).toBe("string");
      expect(["stop", "length"]).toContain(answer.finishReason);
      // The result answers the call by the id the node gave it.
      const sent = bodyOf(answer.request.body).messages as { role: string; tool_call_id?: string; tool_calls?: { id: string }[] }[];
      expect(sent.find((m) => m.role === "tool")?.tool_call_id).toBe(call.toolCallId);
      expect(sent.find((m) => m.role === "assistant")?.tool_calls?.[0]?.id).toBe(call.toolCallId);
    });

    test("streamText: a required call arrives as a tool-call part", async () => {
      const streamed = streamText({ model: model(), prompt: ASK, ...CALL, onError: () => undefined });
      const parts: string[] = [];
      for await (const part of streamed.fullStream) parts.push(part.type);
      expect(parts).toContain("tool-call");
      const calls = await streamed.toolCalls;
      expect(calls).toHaveLength(1);
      expect(calls[0]!.toolName).toBe("get_weather");
      expectCity(calls[0]!.input);
      expect(await streamed.finishReason).toBe("tool-calls");
    });
  });

  describe("LangChain ChatOllama", () => {
    const chat = (numPredict: number) => new ChatOllama({ baseUrl: node().url, model: MODEL, numPredict, temperature: 0, maxRetries: 0 });
    const getWeather = langchainTool(async () => "sunny", { name: "get_weather", description: DESCRIPTION, schema: City });

    test("bindTools: the call as tool_calls, its ToolMessage sent back, and the answer", async () => {
      // ChatOllama takes no tool_choice (Ollama has none): offered the tool, the model calls it.
      const called = await chat(CALL_TOKENS).bindTools([getWeather]).invoke(ASK);
      expect(called.tool_calls).toHaveLength(1);
      const call = called.tool_calls![0]!;
      expect(call.name).toBe("get_weather");
      expectCity(call.args);
      expect(call.id).toBeTruthy();

      const answer = await chat(4).invoke([new HumanMessage(ASK), new AIMessage({ content: "", tool_calls: [call] }), new ToolMessage({ tool_call_id: call.id!, content: "sunny" })]);
      expect(answer.tool_calls ?? []).toEqual([]);
      expect(typeof answer.content).toBe("string");
      expect(["stop", "length"]).toContain(answer.response_metadata.done_reason as string);
    });

    test("withStructuredOutput by function calling: the call's arguments, parsed", async () => {
      const parsed = await chat(CALL_TOKENS).withStructuredOutput(City, { method: "functionCalling", name: "get_weather" }).invoke(ASK);
      expectCity(parsed);
    });
  });
});
