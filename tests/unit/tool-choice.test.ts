/** Requests that force a tool call, in each dialect, refused for a chat template that cannot call tools; the caps read from /props. */
import { describe, expect, test } from "bun:test";
import { templateCapsFromProps } from "../../pool/template-caps.ts";
import { forcedToolChoice, toolChoiceRefusal } from "../../router/serving/tool-choice.ts";

describe("forcedToolChoice", () => {
  test.each<[string, unknown, string | undefined]>([
    ["OpenAI required", { tool_choice: "required" }, 'tool_choice "required"'],
    ["OpenAI auto", { tool_choice: "auto" }, undefined],
    ["OpenAI none", { tool_choice: "none" }, undefined],
    ["no tool_choice", { tools: [{ type: "function" }] }, undefined],
    ["OpenAI named function", { tool_choice: { type: "function", function: { name: "f" } } }, 'tool_choice {"type":"function","function":{"name":"f"}}'],
    ["Responses named function", { tool_choice: { type: "function", name: "f" } }, 'tool_choice {"type":"function","name":"f"}'],
    ["OpenAI allowed tools, required", { tool_choice: { type: "allowed_tools", allowed_tools: { mode: "required", tools: [] } } }, "tool_choice"],
    ["OpenAI allowed tools, auto", { tool_choice: { type: "allowed_tools", allowed_tools: { mode: "auto", tools: [] } } }, undefined],
    ["Anthropic any", { tool_choice: { type: "any" } }, 'tool_choice {"type":"any"}'],
    ["Anthropic tool", { tool_choice: { type: "tool", name: "f" } }, 'tool_choice {"type":"tool","name":"f"}'],
    ["Anthropic auto", { tool_choice: { type: "auto" } }, undefined],
    ["Anthropic none", { tool_choice: { type: "none" } }, undefined],
    ["the older function_call by name", { function_call: { name: "f" } }, 'function_call {"name":"f"}'],
    ["the older function_call auto", { function_call: "auto" }, undefined],
    ["not an object", "x", undefined],
  ])("%s", (_, body, forced) => {
    const out = forcedToolChoice(body);
    if (forced === undefined) return expect(out).toBeUndefined();
    expect(out).toStartWith(forced);
  });
});

describe("toolChoiceRefusal", () => {
  const required = { tool_choice: "required" };
  test.each<[string, string, unknown, { toolCalls: boolean } | undefined, boolean]>([
    ["a template without tool calling, forced: refused", "/v1/chat/completions", required, { toolCalls: false }, true],
    ["Anthropic any on such a template: refused", "/v1/messages", { tool_choice: { type: "any" } }, { toolCalls: false }, true],
    ["Responses required: refused", "/v1/responses", required, { toolCalls: false }, true],
    ["a template that calls tools: goes on", "/v1/chat/completions", required, { toolCalls: true }, false],
    ["caps unknown (an older server): goes on", "/v1/chat/completions", required, undefined, false],
    ["not forced: goes on", "/v1/chat/completions", { tool_choice: "auto" }, { toolCalls: false }, false],
    ["a path without tools: goes on", "/v1/completions", required, { toolCalls: false }, false],
  ])("%s", (_, path, body, caps, refused) => {
    const out = toolChoiceRefusal(path, "tiny", body, caps);
    expect(out !== undefined).toBe(refused);
    if (refused) expect(out).toStartWith(`${forcedToolChoice(body)} cannot be honoured: model "tiny"'s chat template has no tool calling`);
  });
});

describe("templateCapsFromProps", () => {
  test.each<[string, unknown, { toolCalls: boolean } | undefined]>([
    ["neither", { chat_template_caps: { supports_tool_calls: false, supports_tools: false } }, { toolCalls: false }],
    ["both", { chat_template_caps: { supports_tool_calls: true, supports_tools: true } }, { toolCalls: true }],
    ["tools only", { chat_template_caps: { supports_tools: true } }, { toolCalls: true }],
    ["calls only", { chat_template_caps: { supports_tool_calls: true, supports_tools: false } }, { toolCalls: true }],
    ["no caps (an older server)", { total_slots: 1 }, undefined],
    ["caps without the tool fields", { chat_template_caps: { supports_system_role: true } }, undefined],
    ["no props", undefined, undefined],
  ])("%s", (_, props, caps) => expect(templateCapsFromProps(props)).toEqual(caps));
});
