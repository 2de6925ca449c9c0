/** Ollama ↔ OpenAI translation, as tables: names, options, request bodies, answers, NDJSON framing, keep_alive. */
import { describe, expect, test } from "bun:test";
import { keepAliveMs, MAX_EVENT_CHARS, mapChat, mapEmbed, mapFormat, mapGenerate, mapOptions, modelName, ollamaError, StreamTranslator, taggedName, wholeAnswer } from "../../router/dialects/ollama-mapping.ts";
import { isOllamaPath } from "../../router/http/route-table.ts";
import { keepAliveIdleMs } from "../../router/serving/keep-alive.ts";
import { detailsOf, digestOf } from "../../router/dialects/ollama-models.ts";
import { capabilitiesOf } from "../../models/model-capabilities.ts";

const NOW = new Date("2026-01-01T00:00:00Z");

describe("names", () => {
  test.each([
    ["tiny", "tiny"],
    ["tiny:latest", "tiny"],
    ["tiny:q8", "tiny:q8"],
    ["org/x:latest", "org/x"],
  ])("%p is our %p", (ollama, ours) => expect(modelName(ollama)).toBe(ours));
  test.each([
    ["tiny", "tiny:latest"],
    ["tiny:q8", "tiny:q8"],
  ])("%p is listed as %p", (ours, listed) => expect(taggedName(ours)).toBe(listed));
});

describe("options", () => {
  test.each([
    [{ temperature: 0.2, top_p: 0.9, top_k: 40, min_p: 0.05, seed: 7 }, { temperature: 0.2, top_p: 0.9, top_k: 40, min_p: 0.05, seed: 7 }],
    [{ num_predict: 16 }, { max_tokens: 16 }],
    [{ num_predict: -1 }, {}],
    [{ stop: ["\n"], repeat_penalty: 1.1, presence_penalty: 0.5, frequency_penalty: 0.1 }, { stop: ["\n"], repeat_penalty: 1.1, presence_penalty: 0.5, frequency_penalty: 0.1 }],
    // Load-time options are the pool's: ignored per request.
    [{ num_ctx: 8192, num_gpu: 99, num_thread: 4 }, {}],
    [{ no_such_option: 1 }, {}],
    [undefined, {}],
  ])("%p → %p", (options, expected) => expect(mapOptions(options)).toEqual(expected));
});

describe("format", () => {
  test.each([
    ["json", { type: "json_object" }],
    [{ type: "object", properties: { a: { type: "string" } } }, { type: "json_schema", json_schema: { name: "format", schema: { type: "object", properties: { a: { type: "string" } } } } }],
    ["", undefined],
    [undefined, undefined],
  ])("%p → %p", (format, expected) => expect(mapFormat(format)).toEqual(expected));
});

/** The messages `mapChat` sends llama-server for these Ollama messages. */
const sent = (messages: unknown[]) => {
  const mapped = mapChat({ model: "t", stream: false, messages });
  return mapped.ok ? mapped.body.messages : mapped.error;
};
const ask = { role: "user", content: "weather?" };
const assistant = (...calls: { id?: string; name: string }[]) => ({ role: "assistant", content: "", tool_calls: calls.map((c) => ({ ...(c.id ? { id: c.id } : {}), function: { name: c.name, arguments: { city: "paris" } } })) });
const called = (...calls: { id: string; name: string }[]) => ({ role: "assistant", content: "", tool_calls: calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: '{"city":"paris"}' } })) });

describe("tool results answer the call they belong to (tool_call_id, which llama-server's templates render)", () => {
  test.each([
    [
      "Ollama's own client: tool_name, no ids",
      [ask, assistant({ name: "get_weather" }), { role: "tool", content: "sunny", tool_name: "get_weather" }],
      [ask, called({ id: "call_0", name: "get_weather" }), { role: "tool", content: "sunny", tool_call_id: "call_0", name: "get_weather" }],
    ],
    [
      "the AI SDK's Ollama provider: the call's id and tool_call_id are kept",
      [ask, assistant({ id: "abc", name: "get_weather" }), { role: "tool", content: "sunny", tool_call_id: "abc" }],
      [ask, called({ id: "abc", name: "get_weather" }), { role: "tool", content: "sunny", tool_call_id: "abc" }],
    ],
    [
      "LangChain's ChatOllama: the call's id, a tool message with neither: the first unanswered call",
      [ask, assistant({ id: "u1", name: "a" }, { id: "u2", name: "b" }), { role: "tool", content: "1" }, { role: "tool", content: "2" }],
      [ask, called({ id: "u1", name: "a" }, { id: "u2", name: "b" }), { role: "tool", content: "1", tool_call_id: "u1" }, { role: "tool", content: "2", tool_call_id: "u2" }],
    ],
    [
      "two calls answered out of order, by tool_name",
      [ask, assistant({ name: "a" }, { name: "b" }), { role: "tool", content: "2", tool_name: "b" }, { role: "tool", content: "1", tool_name: "a" }],
      [ask, called({ id: "call_0", name: "a" }, { id: "call_1", name: "b" }), { role: "tool", content: "2", tool_call_id: "call_1", name: "b" }, { role: "tool", content: "1", tool_call_id: "call_0", name: "a" }],
    ],
    [
      "two turns of calls: ids count every call of the conversation, a result answers the latest turn",
      [ask, assistant({ name: "a" }), { role: "tool", content: "1", tool_name: "a" }, assistant({ name: "a" }), { role: "tool", content: "2", tool_name: "a" }],
      [ask, called({ id: "call_0", name: "a" }), { role: "tool", content: "1", tool_call_id: "call_0", name: "a" }, called({ id: "call_1", name: "a" }), { role: "tool", content: "2", tool_call_id: "call_1", name: "a" }],
    ],
    ["a tool message with no call before it goes as it is", [ask, { role: "tool", content: "x", tool_name: "a" }], [ask, { role: "tool", content: "x", name: "a" }]],
  ])("%s", (_, messages, expected) => expect(sent(messages)).toEqual(expected));
});

describe("requests", () => {
  test.each([
    [
      "chat streams by default, with usage",
      mapChat({ model: "tiny:latest", messages: [{ role: "user", content: "hi" }], options: { num_predict: 4 } }),
      { ok: true, path: "/chat/completions", model: "tiny", stream: true, body: { model: "tiny", stream: true, stream_options: { include_usage: true }, max_tokens: 4, messages: [{ role: "user", content: "hi" }] } },
    ],
    [
      "chat whole, with images, tools and format",
      mapChat({ model: "v", stream: false, format: "json", tools: [{ type: "function", function: { name: "f" } }], messages: [{ role: "user", content: "what", images: ["AAAA"] }] }),
      {
        ok: true,
        path: "/chat/completions",
        model: "v",
        stream: false,
        body: {
          model: "v",
          stream: false,
          response_format: { type: "json_object" },
          tools: [{ type: "function", function: { name: "f" } }],
          messages: [{ role: "user", content: [{ type: "text", text: "what" }, { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } }] }],
        },
      },
    ],
    [
      "assistant tool calls go back as JSON strings",
      mapChat({ model: "t", stream: false, messages: [{ role: "assistant", content: "", tool_calls: [{ function: { name: "f", arguments: { x: 1 } } }] }, { role: "tool", content: "2", tool_name: "f" }] }),
      {
        ok: true,
        path: "/chat/completions",
        model: "t",
        stream: false,
        body: {
          model: "t",
          stream: false,
          messages: [
            { role: "assistant", content: "", tool_calls: [{ id: "call_0", type: "function", function: { name: "f", arguments: '{"x":1}' } }] },
            { role: "tool", content: "2", tool_call_id: "call_0", name: "f" },
          ],
        },
      },
    ],
    ["chat without a model", mapChat({ messages: [] }), { ok: false, error: '"model" is required' }],
    ["a message without a role", mapChat({ model: "t", messages: [{ content: "x" }] }), { ok: false, error: 'each message needs a "role"' }],
    ["chat that is not an object", mapChat([1]), { ok: false, error: "request body must be a JSON object" }],
    [
      "generate is a chat with the system prompt",
      mapGenerate({ model: "tiny", prompt: "hi", system: "be brief", stream: false }),
      { ok: true, path: "/chat/completions", model: "tiny", stream: false, body: { model: "tiny", stream: false, messages: [{ role: "system", content: "be brief" }, { role: "user", content: "hi" }] } },
    ],
    [
      "raw generate is a completion",
      mapGenerate({ model: "tiny", prompt: "once", raw: true, stream: false }),
      { ok: true, path: "/completions", model: "tiny", stream: false, body: { model: "tiny", stream: false, prompt: "once" } },
    ],
    ["generate with a prompt that is no string", mapGenerate({ model: "tiny", prompt: 3 }), { ok: false, error: '"prompt" must be a string' }],
    ["embed a string", mapEmbed({ model: "e", input: "a" }, false), { ok: true, path: "/embeddings", model: "e", stream: false, body: { model: "e", input: "a" } }],
    ["embed strings", mapEmbed({ model: "e:latest", input: ["a", "b"] }, false), { ok: true, path: "/embeddings", model: "e", stream: false, body: { model: "e", input: ["a", "b"] } }],
    ["legacy embeddings read prompt", mapEmbed({ model: "e", prompt: "a" }, true), { ok: true, path: "/embeddings", model: "e", stream: false, body: { model: "e", input: "a" } }],
    ["embed a number", mapEmbed({ model: "e", input: 1 }, false), { ok: false, error: '"input" must be a string or an array of strings' }],
  ])("%s", (_, got, expected) => expect(got).toEqual(expected as typeof got));
});

const TIMINGS = { prompt_n: 5, prompt_ms: 2, predicted_n: 3, predicted_ms: 4 };
const STATS = { total_duration: 10_000_000, load_duration: 0, prompt_eval_count: 5, prompt_eval_duration: 2_000_000, eval_count: 3, eval_duration: 4_000_000 };

describe("whole answers", () => {
  test.each([
    [
      "chat",
      wholeAnswer("chat", "tiny", { choices: [{ message: { role: "assistant", content: "yo" }, finish_reason: "stop" }], timings: TIMINGS }, 10, NOW),
      { model: "tiny:latest", created_at: NOW.toISOString(), message: { role: "assistant", content: "yo" }, done: true, done_reason: "stop", ...STATS },
    ],
    [
      "generate cut by length, figures from usage",
      wholeAnswer("generate", "tiny", { choices: [{ text: "abc", finish_reason: "length" }], usage: { prompt_tokens: 5, completion_tokens: 3 } }, 10, NOW),
      { model: "tiny:latest", created_at: NOW.toISOString(), response: "abc", done: true, done_reason: "length", ...STATS, prompt_eval_duration: 0, eval_duration: 0 },
    ],
    [
      "tool calls with object arguments",
      wholeAnswer("chat", "t", { choices: [{ message: { content: "", tool_calls: [{ function: { name: "f", arguments: '{"x":1}' } }] }, finish_reason: "tool_calls" }], timings: TIMINGS }, 10, NOW),
      { model: "t:latest", created_at: NOW.toISOString(), message: { role: "assistant", content: "", tool_calls: [{ function: { name: "f", arguments: { x: 1 } } }] }, done: true, done_reason: "stop", ...STATS },
    ],
    [
      "tool calls keep llama-server's ids; the second has Ollama's function.index",
      wholeAnswer("chat", "t", { choices: [{ message: { content: "", tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: "{}" } }, { id: "c2", type: "function", function: { name: "g", arguments: '{"y":2}' } }] }, finish_reason: "tool_calls" }], timings: TIMINGS }, 10, NOW),
      {
        model: "t:latest",
        created_at: NOW.toISOString(),
        message: { role: "assistant", content: "", tool_calls: [{ id: "c1", function: { name: "f", arguments: {} } }, { id: "c2", function: { index: 1, name: "g", arguments: { y: 2 } } }] },
        done: true,
        done_reason: "stop",
        ...STATS,
      },
    ],
  ] as [string, unknown, unknown][])("%s", (_, got, expected) => expect(got).toEqual(expected));
});

const sse = (...events: unknown[]) => events.map((e) => `data: ${typeof e === "string" ? e : JSON.stringify(e)}\n\n`).join("");
const parse = (lines: string[]) => lines.map((l) => JSON.parse(l) as Record<string, unknown>);

describe("streams", () => {
  test("deltas become lines; the final line carries done and the figures", () => {
    const t = new StreamTranslator("chat", "tiny");
    const text = sse({ choices: [{ delta: { role: "assistant" } }] }, { choices: [{ delta: { content: "he" } }] }, { choices: [{ delta: { content: "llo" }, finish_reason: "length" }] }, { choices: [], usage: { prompt_tokens: 5, completion_tokens: 3 }, timings: TIMINGS }, "[DONE]");
    // Split mid-event: the half waits for its end.
    const lines = [...t.push(`: keep-alive\n\n${text.slice(0, 60)}`, NOW), ...t.push(text.slice(60), NOW), t.close(NOW, 10)];
    expect(lines.every((l) => l.endsWith("\n") && !l.slice(0, -1).includes("\n"))).toBe(true);
    expect(parse(lines)).toEqual([
      // The keep-alive: an empty line, so a quiet stream still moves bytes.
      { model: "tiny:latest", created_at: NOW.toISOString(), message: { role: "assistant", content: "" }, done: false },
      { model: "tiny:latest", created_at: NOW.toISOString(), message: { role: "assistant", content: "he" }, done: false },
      { model: "tiny:latest", created_at: NOW.toISOString(), message: { role: "assistant", content: "llo" }, done: false },
      { model: "tiny:latest", created_at: NOW.toISOString(), message: { role: "assistant", content: "" }, done: true, done_reason: "length", ...STATS },
    ]);
  });

  test("generate streams `response`", () => {
    const g = new StreamTranslator("generate", "tiny");
    expect(parse(g.push(sse({ choices: [{ text: "a" }] }), NOW))).toEqual([{ model: "tiny:latest", created_at: NOW.toISOString(), response: "a", done: false }]);
  });

  const line = (message: unknown) => ({ model: "t:latest", created_at: NOW.toISOString(), message, done: false });
  const fragments = [
    { choices: [{ delta: { tool_calls: [{ index: 0, id: "c1", type: "function", function: { name: "f", arguments: '{"x"' } }] } }] },
    { choices: [{ delta: { tool_calls: [{ index: 0, function: { arguments: ":1}" } }] } }] },
    { choices: [{ delta: { tool_calls: [{ index: 1, id: "c2", function: { name: "g", arguments: "{}" } }] } }] },
  ];
  const WHOLE_CALLS = [{ id: "c1", function: { name: "f", arguments: { x: 1 } } }, { id: "c2", function: { index: 1, name: "g", arguments: {} } }];
  test.each([
    ["at the finish_reason", sse(...fragments, { choices: [{ delta: {}, finish_reason: "tool_calls" }] }, { choices: [], usage: { prompt_tokens: 5, completion_tokens: 3 } }, "[DONE]"), [line({ role: "assistant", content: "", tool_calls: WHOLE_CALLS })], []],
    ["at the end, when no finish_reason came", sse(...fragments, "[DONE]"), [], [line({ role: "assistant", content: "", tool_calls: WHOLE_CALLS })]],
  ])("tool call fragments arrive whole in a line of their own before the last (as Ollama's): %s", (_, text, pushed, closing) => {
    const c = new StreamTranslator("chat", "t");
    expect(parse(c.push(text, NOW))).toEqual(pushed);
    const last = c.close(NOW, 1).split("\n").filter((l) => l !== "");
    expect(parse(last.slice(0, -1))).toEqual(closing);
    // The last line has the figures and no calls: done_reason "stop", as Ollama says after a call.
    expect(JSON.parse(last.at(-1)!)).toMatchObject({ message: { role: "assistant", content: "" }, done: true, done_reason: "stop" });
    expect(JSON.parse(last.at(-1)!).message.tool_calls).toBeUndefined();
  });

  test("a call's index is a place in a short list, never a size to grow one to (the answer may come from another node)", () => {
    const c = new StreamTranslator("chat", "t");
    const wild = [1e9, -1, 1.5, 128].map((index) => ({ choices: [{ delta: { tool_calls: [{ index, id: `c${index}`, function: { name: "f", arguments: "{}" } }] } }] }));
    const pushed = parse(c.push(sse(...wild, fragments[2]!, { choices: [{ delta: {}, finish_reason: "tool_calls" }] }, "[DONE]"), NOW));
    expect(pushed).toEqual([line({ role: "assistant", content: "", tool_calls: [{ id: "c2", function: { name: "g", arguments: {} } }] })]);
  });

  test("a thinking model's reasoning is Ollama's `thinking`, streamed and whole", () => {
    const t = new StreamTranslator("chat", "m");
    expect(parse(t.push(sse({ choices: [{ delta: { reasoning_content: "hmm" } }] }), NOW))[0]!.message).toEqual({ role: "assistant", content: "", thinking: "hmm" });
    const g = new StreamTranslator("generate", "m");
    expect(parse(g.push(sse({ choices: [{ delta: { reasoning_content: "so" } }] }), NOW))[0]).toMatchObject({ response: "", thinking: "so" });
    const whole = wholeAnswer("chat", "m", { choices: [{ message: { content: "42", reasoning_content: "think" }, finish_reason: "stop" }] }, 1, NOW);
    expect(whole.message).toEqual({ role: "assistant", content: "42", thinking: "think" });
  });

  test("an event that never ends is bounded: one error line, then nothing", () => {
    const t = new StreamTranslator("chat", "m");
    const lines = t.push(`data: ${"x".repeat(MAX_EVENT_CHARS + 10)}`, NOW);
    expect(parse(lines)).toEqual([{ error: `an event of the stream for model "m" is over ${MAX_EVENT_CHARS} characters` }]);
    expect(t.push(sse({ choices: [{ delta: { content: "late" } }] }), NOW)).toEqual([]);
    expect(t.close(NOW, 1)).toBe("");
  });

  test("CRLF line ends, even split between pieces", () => {
    const t = new StreamTranslator("chat", "m");
    const text = sse({ choices: [{ delta: { content: "a" } }] }, "[DONE]").replaceAll("\n", "\r\n");
    const cut = text.indexOf("\r\n\r") + 3;
    expect(parse([...t.push(text.slice(0, cut), NOW), ...t.push(text.slice(cut), NOW)])).toEqual([{ model: "m:latest", created_at: NOW.toISOString(), message: { role: "assistant", content: "a" }, done: false }]);
    expect(JSON.parse(t.close(NOW, 1))).toMatchObject({ done: true });
  });

  test("nothing after [DONE] counts", () => {
    const t = new StreamTranslator("chat", "m");
    expect(t.push(sse("[DONE]", { error: { message: "late" } }, { choices: [{ delta: { content: "x" } }] }), NOW)).toEqual([]);
    expect(JSON.parse(t.close(NOW, 1))).toMatchObject({ done: true });
  });

  test.each([
    ["an error event", sse({ error: { message: "server exited", type: "x" } }), [{ error: "server exited" }], { error: 'the stream for model "m" ended early' }],
    ["a stream cut short", sse({ choices: [{ delta: { content: "x" } }] }), [{ model: "m:latest", created_at: NOW.toISOString(), message: { role: "assistant", content: "x" }, done: false }], { error: 'the stream for model "m" ended early' }],
  ])("%s ends with an error line", (_, text, lines, last) => {
    const t = new StreamTranslator("chat", "m");
    expect(parse(t.push(text, NOW))).toEqual(lines);
    expect(JSON.parse(t.close(NOW, 1))).toEqual(last);
  });
});

describe("keep_alive", () => {
  test.each([
    [0, 0],
    ["0", 0],
    ["0s", 0],
    [300, 300_000],
    ["5m", 300_000],
    ["1h30m", 5_400_000],
    ["500ms", 500],
    [-1, -1000],
    ["-1m", -60_000],
    ["soon", undefined],
    [undefined, undefined],
  ])("%p → %p ms", (value, ms) => expect(keepAliveMs(value)).toBe(ms as number));
});

describe("errors and descriptions", () => {
  test.each([
    [{ error: { message: "no such model", type: "x" } }, { error: "no such model" }],
    [{ error: "plain" }, { error: "plain" }],
    ["junk", { error: "fallback" }],
  ])("%p → %p", (body, expected) => expect(ollamaError(body, "fallback")).toEqual(expected));

  test.each([
    ["llm", [], ["completion"]],
    ["llm", ["vision"], ["completion", "vision"]],
    ["llm", ["tools", "vision"], ["completion", "tools", "vision"]],
    [undefined, ["tools"], ["completion", "tools"]],
    ["embedding", [], ["embedding"]],
    ["reranking", [], []],
  ] as const)("capabilities of a %p model that can %p", (type, caps, expected) => expect(capabilitiesOf(type, caps)).toEqual([...expected]));

  test("details and digest", () => {
    expect(detailsOf(undefined)).toMatchObject({ format: "gguf", family: "" });
    expect(digestOf("/a", 1, 2)).toMatch(/^[0-9a-f]{64}$/);
    expect(digestOf("/a", 1, 2)).not.toBe(digestOf("/a", 1, 3));
  });
});

describe("isOllamaPath: which errors take Ollama's string shape", () => {
  test.each([
    ["/api/chat", true],
    ["/api/tags", true],
    ["/api/pull", true],
    ["/api/v1/load", false],
    ["/api/v1", false],
    ["/api/status", false],
    ["/api/chat/x", false],
    ["/v1/chat/completions", false],
    ["/api/", false],
  ] as const)("%s: %p", (path, ollama) => expect(isOllamaPath(path)).toBe(ollama));
});

describe("keepAliveIdleMs: what a keep_alive sets", () => {
  test.each([
    [undefined, undefined],
    [0, 0],
    [-1000, -1000],
    [1, 1000],
    [999, 1000],
    [2000, 2000],
  ] as const)("%p ms → %p", (ms, idle) => expect(keepAliveIdleMs(ms)).toBe(idle));
});
