/**
 * Rewriting an answer on its way to the client: which events a rewrite touches (the rest keep their
 * exact bytes), and answers that pass as they came. Where events end is `sse-split.test.ts`'s.
 */
import { describe, expect, test } from "bun:test";
import { rewriteAnswer, rewriteEvent, type AnswerRewrite } from "../../router/dialects/answer-rewrite.ts";
import { isObject, type JsonObject } from "../../router/http/json.ts";

const tagged = (event: string, data: JsonObject): JsonObject | undefined => (data.n === 1 ? { ...data, seen: event } : undefined);

describe("rewriteEvent", () => {
  test.each([
    ["JSON data the rewrite takes", 'data: {"n":1}\n\n', 'data: {"n":1,"seen":"message"}\n\n'],
    ["its event name kept and given to the rewrite", 'event: message_delta\ndata: {"n":1}\n\n', 'event: message_delta\ndata: {"n":1,"seen":"message_delta"}\n\n'],
    ["JSON data the rewrite leaves: the same bytes", 'data:  {"n":2}\r\n\r\n', 'data:  {"n":2}\r\n\r\n'],
    ["[DONE]", "data: [DONE]\n\n", "data: [DONE]\n\n"],
    ["a comment", ": keep-alive\n\n", ": keep-alive\n\n"],
    ["not an object", "data: [1]\n\n", "data: [1]\n\n"],
    ["data over two lines", 'data: {"n":\ndata: 1}\n\n', 'data: {"n":1,"seen":"message"}\n\n'],
  ])("%s", (_, raw, out) => expect(rewriteEvent(raw, tagged)).toBe(out));
});

const marking: AnswerRewrite = {
  whole: (json) => (isObject(json) ? { ...json, marked: true } : json),
  stream: () => {
    let count = 0;
    return (_, data) => ({ ...data, count: ++count });
  },
};

/** A body that arrives in these pieces. */
const pieces = (parts: string[]) =>
  new ReadableStream<Uint8Array>({
    start(controller) {
      for (const p of parts) controller.enqueue(new TextEncoder().encode(p));
      controller.close();
    },
  });

describe("rewriteAnswer", () => {
  test("a 200 JSON answer, whole, its length header gone", async () => {
    const res = await rewriteAnswer(new Response('{"a":1}', { headers: { "content-type": "application/json", "content-length": "7" } }), marking);
    expect(res.headers.get("content-length")).toBeNull();
    expect(await res.json()).toEqual({ a: 1, marked: true });
  });

  test("an error answer as it came", async () => {
    const res = await rewriteAnswer(new Response('{"error":{"message":"x"}}', { status: 400, headers: { "content-type": "application/json" } }), marking);
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: { message: "x" } });
  });

  test("a stream event by event, whatever its pieces, with one rewrite's state across it", async () => {
    const body = pieces(['data: {"a":1}\n\nda', 'ta: {"a":2}\n', "\n: keep-alive\n\ndata: [DONE]\n\n"]);
    const res = await rewriteAnswer(new Response(body, { headers: { "content-type": "text/event-stream" } }), marking);
    expect(await res.text()).toBe('data: {"a":1,"count":1}\n\ndata: {"a":2,"count":2}\n\n: keep-alive\n\ndata: [DONE]\n\n');
  });

  test("a stream's unfinished tail is passed on as it came", async () => {
    const res = await rewriteAnswer(new Response(pieces(['data: {"a":1}\n\ndata: {"a"']), { headers: { "content-type": "text/event-stream" } }), marking);
    expect(await res.text()).toBe('data: {"a":1,"count":1}\n\ndata: {"a"');
  });
});
