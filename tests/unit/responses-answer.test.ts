/**
 * Chat completions turned into Responses API answers, as tables: whole answers, streamed event
 * sequences (order, sequence numbers, the final response), broken and oversized streams, the chat
 * stream's SSE framing; and the real npm `openai` SDK reading what comes out (its stream helper
 * checks every event against the response it rebuilds), fed through its `fetch` option.
 */
import { describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { zodTextFormat } from "openai/helpers/zod";
import { z } from "zod";
import type { Json, JsonObject } from "../../router/http/json.ts";
import { responseOfChat, type ResponseIds } from "../../router/dialects/responses-answer.ts";
import { responsesAnswer } from "../../router/dialects/responses-dialect.ts";
import { chatRequestOf, type ResponsesEcho } from "../../router/dialects/responses-request.ts";
import { MAX_ANSWER_CHARS, readChatSse, ResponsesEvents } from "../../router/dialects/responses-stream.ts";

const MODEL = "tiny";

/** Ids numbered in the order asked, at a fixed time. */
function fixedIds(): ResponseIds {
  let n = 0;
  return { id: "resp_1", createdAt: 1_700_000_000, item: (prefix) => `${prefix}_${++n}`, now: () => 1_700_000_001 };
}

function echoOf(body: JsonObject = {}): ResponsesEcho {
  const out = chatRequestOf({ model: MODEL, input: "hi", ...body });
  if ("error" in out) throw new Error(out.error);
  return out.echo;
}

const USAGE = { prompt_tokens: 12, completion_tokens: 3, total_tokens: 15, prompt_tokens_details: { cached_tokens: 4 } };
const RESPONSES_USAGE = { input_tokens: 12, input_tokens_details: { cached_tokens: 4 }, output_tokens: 3, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 15 };

const chatAnswer = (message: JsonObject, finish = "stop", extra: JsonObject = {}): JsonObject => ({
  id: "chatcmpl-1",
  object: "chat.completion",
  model: "/models/tiny.gguf",
  choices: [{ index: 0, message: { role: "assistant", ...message }, finish_reason: finish, ...extra }],
  usage: USAGE,
});

const CALL = { id: "call_a", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } };

describe("whole answers", () => {
  test.each<[string, JsonObject, { status: string; incomplete: Json; output: Json[] }]>([
    [
      "text: one message with one output_text part",
      chatAnswer({ content: "hello" }),
      { status: "completed", incomplete: null, output: [{ id: "msg_1", type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "hello", annotations: [], logprobs: [] }] }] },
    ],
    [
      "cut at the limit: incomplete, for max_output_tokens",
      chatAnswer({ content: "hel" }, "length"),
      { status: "incomplete", incomplete: { reason: "max_output_tokens" }, output: [{ id: "msg_1", type: "message", role: "assistant", status: "incomplete", content: [{ type: "output_text", text: "hel", annotations: [], logprobs: [] }] }] },
    ],
    [
      "a tool call and no text: one function_call item with the chat call's id",
      chatAnswer({ content: null, tool_calls: [CALL] }, "tool_calls"),
      { status: "completed", incomplete: null, output: [{ id: "fc_1", type: "function_call", call_id: "call_a", name: "get_weather", arguments: '{"city":"Paris"}', status: "completed" }] },
    ],
    [
      "thinking, text and a call: reasoning, message, function_call",
      chatAnswer({ reasoning_content: "hmm", content: "let me look", tool_calls: [{ ...CALL, id: "" }] }, "tool_calls"),
      {
        status: "completed",
        incomplete: null,
        output: [
          { id: "rs_1", type: "reasoning", summary: [], content: [{ type: "reasoning_text", text: "hmm" }], status: "completed" },
          { id: "msg_2", type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "let me look", annotations: [], logprobs: [] }] },
          { id: "fc_3", type: "function_call", call_id: "call_4", name: "get_weather", arguments: '{"city":"Paris"}', status: "completed" },
        ],
      },
    ],
    [
      "nothing said: still one empty message",
      chatAnswer({ content: "" }),
      { status: "completed", incomplete: null, output: [{ id: "msg_1", type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "", annotations: [], logprobs: [] }] }] },
    ],
  ])("%s", (_, chat, expected) => {
    const response = responseOfChat(chat, echoOf(), fixedIds());
    expect(response.status).toBe(expected.status);
    expect(response.incomplete_details).toEqual(expected.incomplete);
    expect(response.output).toEqual(expected.output);
    expect(response.usage).toEqual(RESPONSES_USAGE);
  });

  test("the response repeats the request: model name, instructions, tools, format, metadata", () => {
    const tools = [{ type: "function", name: "f", parameters: { type: "object" } }];
    const echo = echoOf({ instructions: "be brief", tools, tool_choice: "required", temperature: 0, max_output_tokens: 9, metadata: { a: "b" }, text: { format: { type: "json_object" } } });
    const response = responseOfChat(chatAnswer({ content: "{}" }), echo, fixedIds());
    expect(response).toMatchObject({
      id: "resp_1",
      object: "response",
      created_at: 1_700_000_000,
      completed_at: 1_700_000_001,
      model: MODEL,
      instructions: "be brief",
      tools,
      tool_choice: "required",
      temperature: 0,
      max_output_tokens: 9,
      metadata: { a: "b" },
      text: { format: { type: "json_object" } },
      error: null,
      previous_response_id: null,
    });
  });

  test("logprobs, when asked, in the Responses shape", () => {
    const logprobs = { content: [{ id: 5, token: "hi", logprob: -0.5, bytes: [104, 105], top_logprobs: [{ id: 5, token: "hi", logprob: -0.5, bytes: [104, 105] }] }] };
    const response = responseOfChat(chatAnswer({ content: "hi" }, "stop", { logprobs }), echoOf({ top_logprobs: 1 }), fixedIds());
    const message = (response.output as JsonObject[])[0]!;
    expect((message.content as JsonObject[])[0]!.logprobs).toEqual([{ token: "hi", logprob: -0.5, bytes: [104, 105], top_logprobs: [{ token: "hi", logprob: -0.5, bytes: [104, 105] }] }]);
  });
});

const chunk = (delta: JsonObject, finish: string | null = null, extra: JsonObject = {}): JsonObject => ({ object: "chat.completion.chunk", choices: [{ index: 0, delta, finish_reason: finish, ...extra }] });
const usageChunk: JsonObject = { object: "chat.completion.chunk", choices: [], usage: USAGE };

/** Every event a stream of `chunks` gives, start to done. */
function eventsOf(chunks: JsonObject[], echo = echoOf()): JsonObject[] {
  const events = new ResponsesEvents(echo, fixedIds());
  return [...events.start(), ...chunks.flatMap((c) => events.chunk(c)), ...events.done()];
}

const types = (events: JsonObject[]) => events.map((e) => e.type);
const TEXT_ITEM = ["response.output_item.added", "response.content_part.added"];
const TEXT_DONE = ["response.output_text.done", "response.content_part.done", "response.output_item.done"];

describe("streamed answers", () => {
  test.each<[string, JsonObject[], string[]]>([
    [
      "text",
      [chunk({ role: "assistant", content: null }), chunk({ content: "hel" }), chunk({ content: "lo" }), chunk({}, "stop"), usageChunk],
      ["response.created", "response.in_progress", ...TEXT_ITEM, "response.output_text.delta", "response.output_text.delta", ...TEXT_DONE, "response.completed"],
    ],
    ["cut at the limit: response.completed, whose response says incomplete", [chunk({ content: "hel" }), chunk({}, "length")], ["response.created", "response.in_progress", ...TEXT_ITEM, "response.output_text.delta", ...TEXT_DONE, "response.completed"]],
    ["nothing said: one empty message", [chunk({}, "stop")], ["response.created", "response.in_progress", ...TEXT_ITEM, ...TEXT_DONE, "response.completed"]],
    [
      "a tool call, its arguments in pieces",
      [
        chunk({ tool_calls: [{ index: 0, id: "call_a", type: "function", function: { name: "get_weather", arguments: "" } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] }),
        chunk({}, "tool_calls"),
      ],
      [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
      ],
    ],
    [
      "thinking, then text, then two calls",
      [
        chunk({ reasoning_content: "hmm" }),
        chunk({ content: "ok" }),
        chunk({ tool_calls: [{ index: 0, id: "c1", function: { name: "a", arguments: "{}" } }] }),
        chunk({ tool_calls: [{ index: 1, id: "c2", function: { name: "b", arguments: "{}" } }] }),
        chunk({}, "tool_calls"),
      ],
      [
        "response.created",
        "response.in_progress",
        ...TEXT_ITEM,
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.output_item.done",
        ...TEXT_ITEM,
        "response.output_text.delta",
        ...TEXT_DONE,
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
      ],
    ],
  ])("%s", (_, chunks, expected) => {
    const events = eventsOf(chunks);
    expect(types(events)).toEqual(expected);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
  });

  test("the first events carry a response in progress with no output", () => {
    const [created, inProgress] = eventsOf([chunk({}, "stop")]);
    for (const e of [created!, inProgress!]) expect(e.response).toMatchObject({ id: "resp_1", object: "response", status: "in_progress", model: MODEL, output: [], created_at: 1_700_000_000 });
  });

  test("the last event's response is the whole answer's, usage included", () => {
    const streamed = eventsOf([chunk({ reasoning_content: "hmm" }), chunk({ content: "let me " }), chunk({ content: "look" }), chunk({ tool_calls: [{ index: 0, id: "call_a", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }] }), chunk({}, "tool_calls"), usageChunk]).at(-1)!;
    const whole = responseOfChat(chatAnswer({ reasoning_content: "hmm", content: "let me look", tool_calls: [CALL] }, "tool_calls"), echoOf(), fixedIds());
    expect(streamed.response).toEqual(whole);
  });

  test("each event names its item and part", () => {
    const events = eventsOf([chunk({ content: "a" }), chunk({}, "stop")]);
    const delta = events.find((e) => e.type === "response.output_text.delta")!;
    expect(delta).toEqual({ type: "response.output_text.delta", sequence_number: 4, item_id: "msg_1", output_index: 0, content_index: 0, delta: "a", logprobs: [] });
    const done = events.find((e) => e.type === "response.output_item.done")!;
    expect(done.item).toEqual({ id: "msg_1", type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "a", annotations: [], logprobs: [] }] });
  });

  test("a broken stream ends with an error event and response.failed, and completes nothing half", () => {
    const events = new ResponsesEvents(echoOf(), fixedIds());
    const out = [...events.start(), ...events.chunk(chunk({ content: "hal" })), ...events.fail("the node went away; retry", "peer_gone")];
    // The error as an object too: the Python SDK raises on an `error` event only when its data has one.
    expect(out.at(-2)).toEqual({ type: "error", sequence_number: 5, code: "peer_gone", message: "the node went away; retry", param: null, error: { type: "server_error", code: "peer_gone", message: "the node went away; retry" } });
    expect(out.at(-1)).toMatchObject({ type: "response.failed", sequence_number: 6, response: { status: "failed", error: { code: "peer_gone", message: "the node went away; retry" }, output: [] } });
    expect((out.at(-1)!.response as Record<string, unknown>).completed_at).toBeUndefined();
    expect(types(out).filter((t) => String(t).endsWith(".done"))).toEqual([]);
    expect([...events.chunk(chunk({ content: "x" })), ...events.done(), ...events.fail("again", "x")]).toEqual([]);
  });

  test("an answer past the bound ends with an error before the chunk that passes it", () => {
    const events = new ResponsesEvents(echoOf(), fixedIds());
    events.start();
    expect(types(events.chunk(chunk({ content: "x".repeat(MAX_ANSWER_CHARS - 1) })))).toContain("response.output_text.delta");
    const out = events.chunk(chunk({ content: "yy" }));
    expect(types(out)).toEqual(["error", "response.failed"]);
    expect(out[0]).toMatchObject({ type: "error", code: "answer_too_large" });
    expect(events.ended).toBe(true);
  });
});

describe("the chat stream's events", () => {
  test.each<[string, string[], (string | true)[], string]>([
    ["whole events, one piece", ['data: {"a":1}\n\ndata: [DONE]\n\n'], ['{"a":1}', "[DONE]"], ""],
    ["an event split across pieces", ['data: {"a"', ':1}\n', "\ndata: x"], ['{"a":1}'], "data: x"],
    ["CRLF, even split between its halves", ['data: 1\r\n\r', "\ndata: 2\r\n\r\n"], ["1", "2"], ""],
    ["a comment is a keep-alive", [": keep-alive\n\n", "data: 1\n\n"], [true, "1"], ""],
    ["data on two lines", ["data: a\ndata: b\n\n"], ["a\nb"], ""],
    ["other fields are skipped", ["event: x\nid: 3\ndata: 1\n\n"], ["1"], ""],
  ])("%s", (_, pieces, expected, rest) => {
    let held = "";
    const got: (string | true)[] = [];
    for (const piece of pieces) {
      const read = readChatSse(held, piece)!;
      held = read.held;
      for (const e of read.events) got.push("comment" in e ? true : e.data);
    }
    expect(got).toEqual(expected);
    expect(held).toBe(rest);
  });

  test("an event that never ends is refused past the bound", () => {
    expect(readChatSse("", `data: ${"x".repeat(16 * 1024 * 1024)}`)).toBeUndefined();
  });
});

const sse = (chunks: (JsonObject | string)[]) => chunks.map((c) => `data: ${typeof c === "string" ? c : JSON.stringify(c)}\n\n`).join("");

/** An OpenAI client whose every request is answered by `chat` turned into the Responses answer. */
function clientAnswering(chat: () => Response, body: JsonObject = {}): OpenAI {
  const fetch = async (_url: string | URL | Request, init?: RequestInit) => {
    const sent = JSON.parse(String(init?.body)) as JsonObject;
    const request = chatRequestOf({ ...sent, ...body });
    if ("error" in request) return Response.json({ error: { message: request.error, type: "invalid_request_error", code: null } }, { status: 400 });
    return responsesAnswer(chat(), request.echo, fixedIds());
  };
  return new OpenAI({ apiKey: "unused", baseURL: "http://mesh.invalid/v1", maxRetries: 0, fetch: fetch as unknown as typeof globalThis.fetch });
}

const streamed = (chunks: (JsonObject | string)[]) => () => new Response(sse(chunks), { headers: { "content-type": "text/event-stream" } });

describe("what the OpenAI SDK reads", () => {
  test("responses.create: output_text", async () => {
    const client = clientAnswering(() => Response.json(chatAnswer({ content: "hello" })));
    const response = await client.responses.create({ model: MODEL, input: "hi" });
    expect(response.output_text).toBe("hello");
    expect(response.usage?.total_tokens).toBe(15);
  });

  test("responses.stream of text and a tool call: finalResponse", async () => {
    const client = clientAnswering(
      streamed([
        chunk({ role: "assistant", content: null }),
        chunk({ content: "let me " }),
        chunk({ content: "look" }),
        chunk({ tool_calls: [{ index: 0, id: "call_a", type: "function", function: { name: "get_weather", arguments: '{"city":' } }] }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] }),
        chunk({}, "tool_calls"),
        usageChunk,
        "[DONE]",
      ]),
    );
    const stream = client.responses.stream({ model: MODEL, input: "weather?", tools: [{ type: "function", name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } }, strict: false }] });
    const deltas: string[] = [];
    stream.on("response.output_text.delta", (e) => deltas.push(e.delta));
    const final = await stream.finalResponse();
    expect(deltas).toEqual(["let me ", "look"]);
    expect(final.output_text).toBe("let me look");
    expect(final.output.map((o) => o.type)).toEqual(["message", "function_call"]);
    expect(final.output[1]).toMatchObject({ type: "function_call", call_id: "call_a", name: "get_weather", arguments: '{"city":"Paris"}' });
    expect(final.usage?.output_tokens).toBe(3);
  });

  test("responses.stream with thinking, cut at the limit: an incomplete response", async () => {
    const client = clientAnswering(streamed([chunk({ reasoning_content: "hm" }), chunk({ content: "a" }), chunk({}, "length"), usageChunk, "[DONE]"]));
    const final = await client.responses.stream({ model: MODEL, input: "hi" }).finalResponse();
    expect(final.status).toBe("incomplete");
    expect(final.incomplete_details?.reason).toBe("max_output_tokens");
    expect(final.output_text).toBe("a");
  });

  test("responses.parse with a zod format, whole and streamed", async () => {
    const Answer = z.object({ answer: z.enum(["yes", "no"]) });
    const format = zodTextFormat(Answer, "answer");
    const whole = clientAnswering(() => Response.json(chatAnswer({ content: '{"answer": "yes"}' })));
    const parsed = await whole.responses.parse({ model: MODEL, input: "yes?", text: { format } });
    expect(parsed.output_parsed).toEqual({ answer: "yes" });
    const stream = clientAnswering(streamed([chunk({ content: '{"answer":' }), chunk({ content: ' "no"}' }), chunk({}, "stop"), "[DONE]"]));
    const final = await stream.responses.stream({ model: MODEL, input: "no?", text: { format } }).finalResponse();
    expect(final.output_parsed).toEqual({ answer: "no" });
  });

  test("a broken stream: the SDK throws the error event's message", async () => {
    const client = clientAnswering(streamed([chunk({ content: "hal" }), { error: { message: "the node serving this model went away mid-stream; retry", type: "service_unavailable", code: "peer_gone" } }]));
    const stream = client.responses.stream({ model: MODEL, input: "hi" });
    await expect(stream.finalResponse()).rejects.toThrow(/went away mid-stream/);
  });

  test("a stream that stops without finishing: the SDK throws", async () => {
    const client = clientAnswering(streamed([chunk({ content: "hal" })]));
    await expect(client.responses.stream({ model: MODEL, input: "hi" }).finalResponse()).rejects.toThrow(/stopped before it was complete/);
  });

  test("an error answer passes as it came", async () => {
    const client = clientAnswering(() => Response.json({ error: { message: "model is loading", type: "service_unavailable", code: "model_not_ready" } }, { status: 503 }));
    // An APIPromise settles lazily: awaited inside a plain promise, it rejects as the client sees it.
    await expect((async () => await client.responses.create({ model: MODEL, input: "hi" }))()).rejects.toThrow(/model is loading/);
  });
});
