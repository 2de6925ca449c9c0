/** Responses API requests as the chat completions llama-server answers, and the ones refused, as tables. */
import { describe, expect, test } from "bun:test";
import type { JsonObject } from "../../router/http/json.ts";
import { chatRequestOf } from "../../router/dialects/responses-request.ts";

const M = "tiny";
const chatOf = (body: JsonObject) => {
  const out = chatRequestOf({ model: M, ...body });
  if ("error" in out) throw new Error(out.error);
  return out.chat;
};
const IMAGE = "data:image/png;base64,iVBORw0KGgo=";
const TOOL = { type: "function", name: "get_weather", description: "weather in a city", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] }, strict: true };
const CHAT_TOOL = { type: "function", function: { name: "get_weather", description: "weather in a city", parameters: TOOL.parameters, strict: true } };

describe("conversations", () => {
  test.each<[string, JsonObject, unknown[]]>([
    ["a string input is one user message", { input: "hi" }, [{ role: "user", content: "hi" }]],
    ["instructions come first, as the system message", { instructions: "be brief", input: "hi" }, [{ role: "system", content: "be brief" }, { role: "user", content: "hi" }]],
    [
      "easy input messages (role and content, no type), every role; developer speaks as system",
      { input: [{ role: "developer", content: "d" }, { role: "system", content: "s" }, { role: "user", content: "u" }, { role: "assistant", content: "a" }] },
      [{ role: "system", content: "d" }, { role: "system", content: "s" }, { role: "user", content: "u" }, { role: "assistant", content: "a" }],
    ],
    [
      "message items with type, content as parts: one text part is a string",
      {
        input: [
          { type: "message", role: "user", content: [{ type: "input_text", text: "q1" }] },
          { type: "message", role: "assistant", content: [{ type: "output_text", text: "a1", annotations: [] }] },
          { type: "message", role: "user", content: [{ type: "input_text", text: "q2" }] },
        ],
      },
      [{ role: "user", content: "q1" }, { role: "assistant", content: "a1" }, { role: "user", content: "q2" }],
    ],
    [
      "text and an inline image stay parts",
      { input: [{ role: "user", content: [{ type: "input_text", text: "what is it?" }, { type: "input_image", image_url: IMAGE, detail: "low" }] }] },
      [{ role: "user", content: [{ type: "text", text: "what is it?" }, { type: "image_url", image_url: { url: IMAGE, detail: "low" } }] }],
    ],
    ["an image with detail auto says no detail", { input: [{ role: "user", content: [{ type: "input_image", image_url: IMAGE, detail: "auto" }] }] }, [{ role: "user", content: [{ type: "image_url", image_url: { url: IMAGE } }] }]],
    ["empty parts are empty text", { input: [{ role: "user", content: [] }] }, [{ role: "user", content: "" }]],
    [
      "a function call and its output: assistant tool_calls and a tool message",
      {
        input: [
          { role: "user", content: "weather in Paris?" },
          { type: "function_call", id: "fc_1", call_id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}', status: "completed" },
          { type: "function_call_output", call_id: "call_1", output: "sunny" },
        ],
      },
      [
        { role: "user", content: "weather in Paris?" },
        { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] },
        { role: "tool", tool_call_id: "call_1", content: "sunny" },
      ],
    ],
    [
      "text then two calls in one turn are one assistant message; output parts are joined text",
      {
        input: [
          { role: "user", content: "both?" },
          { role: "assistant", content: "checking" },
          { type: "function_call", call_id: "c1", name: "a", arguments: "{}" },
          { type: "function_call", call_id: "c2", name: "b", arguments: { x: 1 } },
          { type: "function_call_output", call_id: "c1", output: [{ type: "input_text", text: "one" }, { type: "input_text", text: "two" }] },
          { type: "function_call_output", call_id: "c2", output: "3" },
        ],
      },
      [
        { role: "user", content: "both?" },
        {
          role: "assistant",
          content: "checking",
          tool_calls: [
            { id: "c1", type: "function", function: { name: "a", arguments: "{}" } },
            { id: "c2", type: "function", function: { name: "b", arguments: '{"x":1}' } },
          ],
        },
        { role: "tool", tool_call_id: "c1", content: "one\ntwo" },
        { role: "tool", tool_call_id: "c2", content: "3" },
      ],
    ],
    [
      "reasoning items are left out (templates drop past thinking)",
      { input: [{ role: "user", content: "hi" }, { type: "reasoning", id: "rs_1", summary: [] }, { role: "assistant", content: "hello" }] },
      [{ role: "user", content: "hi" }, { role: "assistant", content: "hello" }],
    ],
  ])("%s", (_, body, messages) => expect(chatOf(body).messages).toEqual(messages as never));
});

describe("settings", () => {
  test.each<[string, JsonObject, JsonObject]>([
    ["nothing asked: model and messages only", { input: "x" }, { model: M, messages: [{ role: "user", content: "x" }] }],
    [
      "sampling and limits",
      { input: "x", max_output_tokens: 16, temperature: 0, top_p: 0.5, parallel_tool_calls: false },
      { model: M, messages: [{ role: "user", content: "x" }], max_tokens: 16, temperature: 0, top_p: 0.5, parallel_tool_calls: false },
    ],
    ["a stream asks for its usage", { input: "x", stream: true }, { model: M, messages: [{ role: "user", content: "x" }], stream: true, stream_options: { include_usage: true } }],
    ["function tools and a named tool_choice", { input: "x", tools: [TOOL], tool_choice: { type: "function", name: "get_weather" } }, { model: M, messages: [{ role: "user", content: "x" }], tools: [CHAT_TOOL], tool_choice: { type: "function", function: { name: "get_weather" } } }],
    ["tool_choice required", { input: "x", tools: [TOOL], tool_choice: "required" }, { model: M, messages: [{ role: "user", content: "x" }], tools: [CHAT_TOOL], tool_choice: "required" }],
    [
      "allowed_tools narrows the tools",
      { input: "x", tools: [TOOL, { type: "function", name: "other" }], tool_choice: { type: "allowed_tools", mode: "required", tools: [{ type: "function", name: "get_weather" }] } },
      { model: M, messages: [{ role: "user", content: "x" }], tools: [CHAT_TOOL], tool_choice: "required" },
    ],
    [
      "a tool without parameters gets an empty object schema",
      { input: "x", tools: [{ type: "function", name: "now" }] },
      { model: M, messages: [{ role: "user", content: "x" }], tools: [{ type: "function", function: { name: "now", parameters: { type: "object", properties: {} } } }] },
    ],
    [
      "a JSON schema format reaches the model as response_format",
      { input: "x", text: { format: { type: "json_schema", name: "answer", schema: { type: "object" }, strict: true } } },
      { model: M, messages: [{ role: "user", content: "x" }], response_format: { type: "json_schema", json_schema: { name: "answer", schema: { type: "object" }, strict: true } } },
    ],
    ["json_object", { input: "x", text: { format: { type: "json_object" } } }, { model: M, messages: [{ role: "user", content: "x" }], response_format: { type: "json_object" } }],
    ["plain text asks nothing", { input: "x", text: { format: { type: "text" }, verbosity: "low" } }, { model: M, messages: [{ role: "user", content: "x" }] }],
    ["reasoning effort", { input: "x", reasoning: { effort: "low", summary: "auto" } }, { model: M, messages: [{ role: "user", content: "x" }], reasoning_effort: "low" }],
    ["top_logprobs", { input: "x", top_logprobs: 2 }, { model: M, messages: [{ role: "user", content: "x" }], logprobs: true, top_logprobs: 2 }],
    ["logprobs through include", { input: "x", include: ["message.output_text.logprobs"] }, { model: M, messages: [{ role: "user", content: "x" }], logprobs: true, top_logprobs: 0 }],
    [
      "store, metadata, user, truncation and service_tier ask nothing of the model; llama-server's own fields pass",
      { input: "x", store: true, metadata: { a: "b" }, user: "u", truncation: "auto", service_tier: "auto", top_k: 1, seed: 3, stop: ["\n"] },
      { model: M, messages: [{ role: "user", content: "x" }], top_k: 1, seed: 3, stop: ["\n"] },
    ],
  ])("%s", (_, body, chat) => expect(chatOf(body)).toEqual(chat));

  test("the echo repeats the request's settings and the model's name", () => {
    const out = chatRequestOf({ model: M, input: "x", instructions: "i", tools: [TOOL], tool_choice: "auto", temperature: 0, max_output_tokens: 8, metadata: { k: "v" }, user: "u", text: { format: { type: "json_object" } } });
    if ("error" in out) throw new Error(out.error);
    expect(out.echo).toEqual({
      model: M,
      instructions: "i",
      max_output_tokens: 8,
      temperature: 0,
      top_p: null,
      top_logprobs: null,
      tools: [TOOL],
      tool_choice: "auto",
      parallel_tool_calls: true,
      text: { format: { type: "json_object" } },
      reasoning: { effort: null, summary: null },
      metadata: { k: "v" },
      user: "u",
      logprobs: false,
    });
  });
});

describe("refused, with what to do", () => {
  test.each<[string, JsonObject, RegExp]>([
    ["previous_response_id: no state is kept", { input: "x", previous_response_id: "resp_1" }, /keeps no responses.*send the whole conversation/],
    ["conversation", { input: "x", conversation: "conv_1" }, /send the whole conversation/],
    ["background", { input: "x", background: true }, /background/],
    ["stored prompts", { input: "x", prompt: { id: "pmpt_1" } }, /stored prompts/],
    ["no input", {}, /"input" is needed/],
    ["input of another kind", { input: 3 }, /"input" must be/],
    ["a hosted tool", { input: "x", tools: [{ type: "web_search" }] }, /tool type "web_search" is not supported.*only function tools/],
    ["a tool_choice naming an unknown function", { input: "x", tools: [TOOL], tool_choice: { type: "function", name: "nope" } }, /not among "tools"/],
    ["a hosted tool_choice", { input: "x", tool_choice: { type: "file_search" } }, /tool_choice .* is not supported/],
    ["an unknown role", { input: [{ role: "robot", content: "x" }] }, /role must be user, assistant, system or developer/],
    ["an image by file id", { input: [{ role: "user", content: [{ type: "input_image", file_id: "file_1" }] }] }, /send the image inline/],
    ["an image in an assistant message", { input: [{ role: "assistant", content: [{ type: "input_image", image_url: IMAGE }] }] }, /only user messages may carry images/],
    ["a file part", { input: [{ role: "user", content: [{ type: "input_file", file_data: "x" }] }] }, /input_file parts are not supported/],
    ["an item reference", { input: [{ type: "item_reference", id: "msg_1" }] }, /send the item itself/],
    ["another item type", { input: [{ type: "computer_call_output", call_id: "c" }] }, /input item type "computer_call_output" is not supported/],
    ["a function_call without call_id", { input: [{ type: "function_call", name: "a", arguments: "{}" }] }, /needs call_id and name/],
    ["an image in a function's output", { input: [{ type: "function_call_output", call_id: "c", output: [{ type: "input_image", image_url: IMAGE }] }] }, /reaches the model as text/],
    ["a schema format without schema", { input: "x", text: { format: { type: "json_schema", name: "a" } } }, /needs a "schema"/],
    ["max_output_tokens of 0", { input: "x", max_output_tokens: 0 }, /at least 1/],
    ["temperature as text", { input: "x", temperature: "hot" }, /"temperature" must be a number/],
    ["instructions as a list", { input: "x", instructions: ["a"] }, /"instructions" must be a string/],
    ["top_logprobs past 20", { input: "x", top_logprobs: 21 }, /from 0 to 20/],
  ])("%s", (_, body, why) => {
    const out = chatRequestOf({ model: M, ...body });
    expect("error" in out ? out.error : "served").toMatch(why);
  });
});
