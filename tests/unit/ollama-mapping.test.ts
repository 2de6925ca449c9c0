/** Ollama ↔ OpenAI translation, as tables: names, options, request bodies, answers, NDJSON framing, keep_alive. */
import { describe, expect, test } from "bun:test";
import { keepAliveMs, MAX_EVENT_CHARS, mapChat, mapEmbed, mapFormat, mapGenerate, mapOptions, modelName, ollamaError, StreamTranslator, taggedName, wholeAnswer } from "../../router/dialects/ollama-mapping.ts";
import { isOllamaPath } from "../../router/http/route-table.ts";
import { keepAliveIdleMs } from "../../router/serving/keep-alive.ts";
import { capabilitiesOf, detailsOf, digestOf } from "../../router/dialects/ollama-models.ts";

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
            { role: "tool", content: "2", name: "f" },
          ],
        },
      },
    ],
    ["chat without a model", mapChat({ messages: [] }), { ok: false, error: '"model" is required' }],
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
  ])("%s", (_, got, expected) => expect(got).toEqual(expected));
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

  test("generate streams `response`; tool call fragments arrive whole at the end", () => {
    const g = new StreamTranslator("generate", "tiny");
    expect(parse(g.push(sse({ choices: [{ text: "a" }] }), NOW))).toEqual([{ model: "tiny:latest", created_at: NOW.toISOString(), response: "a", done: false }]);
    const c = new StreamTranslator("chat", "t");
    c.push(sse({ choices: [{ delta: { tool_calls: [{ index: 0, function: { name: "f", arguments: '{"x"' } }] } }] }, { choices: [{ delta: { tool_calls: [{ index: 0, function: { arguments: ":1}" } }] }, finish_reason: "tool_calls" }] }, "[DONE]"), NOW);
    expect(parse([c.close(NOW, 1)])[0]!.message).toEqual({ role: "assistant", content: "", tool_calls: [{ function: { name: "f", arguments: { x: 1 } } }] });
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
