/** A named tool choice in words llama-server honours: the chat API's and Anthropic's. */
import { describe, expect, test } from "bun:test";
import type { JsonObject } from "../../router/http/json.ts";
import { narrowChatToolChoice, narrowMessagesToolChoice } from "../../router/serving/named-tool-choice.ts";

const fn = (name: string) => ({ type: "function", function: { name, parameters: { type: "object" } } });
const chatTools = [fn("get_weather"), fn("get_time")];

describe("narrowChatToolChoice", () => {
  test.each<[string, JsonObject, JsonObject | string | undefined]>([
    ["no choice: nothing to change", { tools: chatTools }, undefined],
    ["a string choice: nothing to change", { tools: chatTools, tool_choice: "required" }, undefined],
    ["a named function: it alone, required", { tools: chatTools, tool_choice: { type: "function", function: { name: "get_time" } } }, { tools: [fn("get_time")], tool_choice: "required" }],
    [
      "allowed_tools, required: those, required",
      { tools: chatTools, tool_choice: { type: "allowed_tools", allowed_tools: { mode: "required", tools: [{ type: "function", function: { name: "get_weather" } }] } } },
      { tools: [fn("get_weather")], tool_choice: "required" },
    ],
    [
      "allowed_tools, auto: those, auto",
      { tools: chatTools, tool_choice: { type: "allowed_tools", allowed_tools: { mode: "auto", tools: [{ type: "function", function: { name: "get_time" } }] } } },
      { tools: [fn("get_time")], tool_choice: "auto" },
    ],
    ["a function the request lacks: refused", { tools: chatTools, tool_choice: { type: "function", function: { name: "launch" } } }, 'tool_choice {"type":"function","function":{"name":"launch"}} names no function among "tools"'],
    ["named, with no tools: refused", { tool_choice: { type: "function", function: { name: "x" } } }, 'tool_choice {"type":"function","function":{"name":"x"}} names no function among "tools"'],
    ["an object of another kind: left to the server", { tools: chatTools, tool_choice: { type: "custom" } }, undefined],
  ])("%s", (_, body, expected) => {
    const out = narrowChatToolChoice(body);
    expect(out === undefined || typeof out === "string" ? out : { tools: out.tools, tool_choice: out.tool_choice }).toEqual(expected as never);
  });

  test("the rest of the body is kept", () => {
    const out = narrowChatToolChoice({ model: "m", messages: [], tools: chatTools, tool_choice: { type: "function", function: { name: "get_time" } }, max_tokens: 9 });
    expect(out).toMatchObject({ model: "m", messages: [], max_tokens: 9 });
  });
});

describe("narrowMessagesToolChoice", () => {
  const tool = (name: string) => ({ name, input_schema: { type: "object" } });
  const tools = [tool("get_weather"), tool("get_time")];
  test.each<[string, JsonObject, JsonObject | string | undefined]>([
    ["no choice", { tools }, undefined],
    ["auto", { tools, tool_choice: { type: "auto" } }, undefined],
    ["any", { tools, tool_choice: { type: "any" } }, undefined],
    ["a named tool: it alone, any, its other fields kept", { max_tokens: 5, tools, tool_choice: { type: "tool", name: "get_time", disable_parallel_tool_use: true } }, { max_tokens: 5, tools: [tool("get_time")], tool_choice: { type: "any", disable_parallel_tool_use: true } }],
    ["none: no tools at all (llama-server would take it as auto)", { max_tokens: 5, tools, tool_choice: { type: "none" } }, { max_tokens: 5 }],
    ["a tool the request lacks: refused", { tools, tool_choice: { type: "tool", name: "launch" } }, 'tool_choice names the tool "launch", which is not among "tools"'],
  ])("%s", (_, body, expected) => expect(narrowMessagesToolChoice(body)).toEqual(expected as never));
});
