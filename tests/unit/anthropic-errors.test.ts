/** Errors on Anthropic's routes take its shape, whatever shape they were made in. */
import { describe, expect, test } from "bun:test";
import { anthropicErrorBody, anthropicErrorType, isAnthropicPath } from "../../router/dialects/anthropic-errors.ts";

describe("anthropicErrorType", () => {
  test.each([
    [400, "invalid_request_error"],
    [401, "authentication_error"],
    [403, "permission_error"],
    [404, "not_found_error"],
    [413, "request_too_large"],
    [429, "rate_limit_error"],
    [500, "api_error"],
    [503, "overloaded_error"],
  ])("%d: %s", (status, type) => expect(anthropicErrorType(status)).toBe(type));
});

describe("anthropicErrorBody", () => {
  test.each([
    ["ours (OpenAI's shape): its code kept", 404, '{"error":{"message":"model \\"x\\" is not known","type":"not_found_error","code":"model_not_found"}}', 'model "x" is not known', "model_not_found"],
    ["llama-server's (a numeric code is its status: dropped)", 400, '{"error":{"code":400,"message":"bad input","type":"invalid_request_error"}}', "bad input", undefined],
    ["Ollama's string", 400, '{"error":"plain"}', "plain", undefined],
    ["already Anthropic's", 429, '{"type":"error","error":{"type":"rate_limit_error","message":"busy"}}', "busy", undefined],
    ["not JSON", 502, "bad gateway", "bad gateway", undefined],
  ])("%s", (_, status, text, message, code) =>
    expect(anthropicErrorBody(status, text)).toEqual({ type: "error", error: { type: anthropicErrorType(status), message, ...(code ? { code } : {}) } }),
  );
});

test.each([
  ["/v1/messages", true],
  ["/v1/messages/count_tokens", true],
  ["/api/v1/messages", true],
  ["/api/v0/messages", true],
  ["/v1/chat/completions", false],
  ["/v1/messages/other", false],
  ["/api/chat", false],
])("isAnthropicPath(%p) = %p", (path, yes) => expect(isAnthropicPath(path)).toBe(yes));
