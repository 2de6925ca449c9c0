import { describe, expect, test } from "bun:test";
import { modelOfBody } from "../../router/dialects/openai.ts";
import { figuresOf, figuresOfSse, toStats } from "../../metrics/request-stats.ts";
import { sseEndedCleanly } from "../../router/http/sse-events.ts";

describe("modelOfBody", () => {
  test.each([
    ['{"model":"a","messages":[]}', { model: "a" }],
    ["{", { error: "request body is not valid JSON" }],
    ["[]", { error: "request body must be a JSON object" }],
    ["null", { error: "request body must be a JSON object" }],
    ['{"messages":[]}', { error: 'request body needs a "model"' }],
    ['{"model":""}', { error: 'request body needs a "model"' }],
    ['{"model":7}', { error: 'request body needs a "model"' }],
  ])("%p", (body, expected) => {
    const got = modelOfBody(body);
    if ("model" in expected) expect(got).toMatchObject(expected);
    else expect("error" in got && got.error).toStartWith(expected.error);
  });
});

test.each([
  ['data: {"a":1}\n\ndata: [DONE]\n\n', true],
  ["event: response.completed\ndata: {}\n\n", true],
  ["event: message_stop\ndata: {}\n\n", true],
  ['data: {"choices":[]}\n\n', false],
  ["", false],
])("sseEndedCleanly(%p) = %p", (text, ok) => expect(sseEndedCleanly(text)).toBe(ok));

describe("request stats", () => {
  test("from a JSON body: timings and usage", () => {
    const f = figuresOf({ usage: { prompt_tokens: 12, completion_tokens: 5 }, timings: { prompt_ms: 250, predicted_per_second: 40 } });
    expect(toStats("m", "/v1/chat/completions", f, { firstByteMs: undefined, totalMs: 1500 })).toEqual({
      model: "m",
      route: "/v1/chat/completions",
      time_to_first_token: 0.25,
      tokens_per_second: 40,
      input_tokens: 12,
      output_tokens: 5,
      duration: 1.5,
    });
  });
  test("from an SSE tail that starts mid-event", () => {
    const tail = 'ices":[]}\n\ndata: {"choices":[],"timings":{"cache_n":10,"prompt_n":2,"predicted_n":8,"predicted_ms":400}}\n\ndata: [DONE]\n\n';
    const stats = toStats("m", "/v1/completions", figuresOfSse(tail), { firstByteMs: 30, totalMs: 500 });
    expect(stats.input_tokens).toBe(12);
    expect(stats.output_tokens).toBe(8);
    expect(stats.tokens_per_second).toBe(20);
    expect(stats.time_to_first_token).toBe(0.03);
  });
  test.each([
    ["the last event's figures win", 'data: {"usage":{"prompt_tokens":1},"timings":{"prompt_n":1}}\n\ndata: {"usage":{"prompt_tokens":7},"timings":{"prompt_n":7}}\n\ndata: [DONE]\n\n', 7, 7],
    ["usage in a later event than timings (OpenAI's include_usage chunk)", 'data: {"timings":{"prompt_n":3}}\n\ndata: {"choices":[],"usage":{"prompt_tokens":9}}\n\n', 9, 3],
    ["usage only in an earlier event", 'data: {"usage":{"prompt_tokens":4}}\n\ndata: {"choices":[{"text":"\\"usage\\""}]}\n\ndata: {"timings":{"prompt_n":2}}\n\n', 4, 2],
    ["CRLF line ends", 'data: {"usage":{"prompt_tokens":5},"timings":{"prompt_n":6}}\r\n\r\ndata: [DONE]\r\n\r\n', 5, 6],
    ["a token that says timings in its text is no figure", 'data: {"choices":[{"text":"timings usage"}]}\n\n', undefined, undefined],
    ["a broken last event", 'data: {"usage":{"prompt_tokens":2},"timings":{"prompt_n":2}}\n\ndata: {"usage":{"prompt_t\n\n', 2, 2],
  ])("from an SSE tail: %s", (_, tail, prompt, read) => {
    const f = figuresOfSse(tail);
    expect(f.usage?.prompt_tokens).toBe(prompt);
    expect(f.timings?.prompt_n).toBe(read);
  });
  test("nothing reported: nulls", () => {
    expect(toStats("m", "/v1/embeddings", figuresOf("x"), { firstByteMs: undefined, totalMs: 1 })).toMatchObject({
      time_to_first_token: null,
      tokens_per_second: null,
      input_tokens: null,
      output_tokens: null,
    });
  });
});
