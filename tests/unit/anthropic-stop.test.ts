/** Anthropic's stop reason for a reply that stopped on a requested stop sequence, whole and streamed. */
import { describe, expect, test } from "bun:test";
import { messagesTranslator, stopReasonOfEvent, stopReasonOfMessage, withStopReason } from "../../router/dialects/anthropic-stop.ts";
import type { JsonObject } from "../../router/http/json.ts";

const SEQUENCES = ["on", "\n\nHuman:"];

describe("withStopReason", () => {
  test.each<[string, JsonObject, string]>([
    ["end_turn on a requested sequence: stop_sequence", { stop_reason: "end_turn", stop_sequence: "on" }, "stop_sequence"],
    ["a sequence with new lines", { stop_reason: "end_turn", stop_sequence: "\n\nHuman:" }, "stop_sequence"],
    ["end_turn without a sequence: the model ended its turn", { stop_reason: "end_turn", stop_sequence: null }, "end_turn"],
    ["a sequence nobody asked for: left as it is", { stop_reason: "end_turn", stop_sequence: "x" }, "end_turn"],
    ["a tool call keeps its reason", { stop_reason: "tool_use", stop_sequence: "on" }, "tool_use"],
    ["the token limit keeps its reason", { stop_reason: "max_tokens", stop_sequence: null }, "max_tokens"],
    ["already right (a node before us put it right)", { stop_reason: "stop_sequence", stop_sequence: "on" }, "stop_sequence"],
  ])("%s", (_, stop, reason) => expect(withStopReason(stop, SEQUENCES).stop_reason).toBe(reason));
});

test("a whole message: the reason put right, the rest the same", () => {
  const message = { type: "message", role: "assistant", content: [{ type: "text", text: "hi " }], stop_reason: "end_turn", stop_sequence: "on", usage: { output_tokens: 2 } };
  expect(stopReasonOfMessage(message, SEQUENCES)).toEqual({ ...message, stop_reason: "stop_sequence" });
  expect(stopReasonOfMessage({ type: "error", error: {} }, SEQUENCES)).toEqual({ type: "error", error: {} });
});

describe("stopReasonOfEvent", () => {
  const delta = { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: "on" }, usage: { output_tokens: 5 } };
  test("message_delta: put right", () => {
    expect(stopReasonOfEvent("message_delta", delta, SEQUENCES)).toEqual({ ...delta, delta: { stop_reason: "stop_sequence", stop_sequence: "on" } });
  });
  test("message_delta named only by its type", () => {
    expect(stopReasonOfEvent("message", delta, SEQUENCES)).toMatchObject({ delta: { stop_reason: "stop_sequence" } });
  });
  test.each<[string, string, JsonObject]>([
    ["message_start", "message_start", { type: "message_start", message: { stop_reason: null, stop_sequence: null } }],
    ["a text delta", "content_block_delta", { type: "content_block_delta", delta: { type: "text_delta", text: "on" } }],
    ["a stop on the token limit", "message_delta", { type: "message_delta", delta: { stop_reason: "max_tokens", stop_sequence: null } }],
  ])("%s: untouched", (_, event, data) => expect(stopReasonOfEvent(event, data, SEQUENCES)).toBeUndefined());
});

test("the translator: only for a request with stop sequences, sent on as it is", () => {
  expect(messagesTranslator({ model: "m", messages: [] })).toBeUndefined();
  expect(messagesTranslator({ model: "m", messages: [], stop_sequences: [] })).toBeUndefined();
  const body = { model: "m", messages: [], stop_sequences: ["on"] };
  expect(messagesTranslator(body)).toMatchObject({ path: "/v1/messages", body });
});
