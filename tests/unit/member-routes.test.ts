/** What a mesh member may ask of a node's API: a table of methods and paths, path tricks included. */
import { describe, expect, test } from "bun:test";
import { MAX_MEMBER_PATH, MEMBER_INFERENCE_PATHS, memberMayRequest } from "../../mesh/member-routes.ts";
import { INFERENCE_PATHS } from "../../router/dialects/openai.ts";

describe("memberMayRequest", () => {
  const allowed: [string, string][] = [
    ["POST", "/v1/chat/completions"],
    ["POST", "/v1/completions"],
    ["POST", "/v1/embeddings"],
    ["POST", "/v1/rerank"],
    ["POST", "/v1/reranking"],
    ["POST", "/v1/responses"],
    ["POST", "/v1/messages"],
    ["POST", "/v1/messages/count_tokens"],
    ["POST", "/tokenize"],
    ["POST", "/detokenize"],
    ["POST", "/apply-template"],
    ["POST", "/v1/chat/completions?stream=true"],
    ["GET", "/v1/models"],
    ["GET", "/v1/models?x=1"],
    ["GET", "/v1/models/tiny-q8_0"],
    ["GET", "/v1/models/folder/qwen2.5-7b"],
    ["GET", "/v1/models/with%20space"],
    ["GET", "/api/ps"],
  ];
  test.each(allowed)("%s %s is open to members", (method, path) => expect(memberMayRequest(method, path)).toEqual({ ok: true }));

  const refused: [string, string, string][] = [
    // Administration.
    ["POST", "/api/v1/load", "only the inference routes"],
    ["POST", "/api/v1/unload", "only the inference routes"],
    ["GET", "/api/status", "only the inference routes"],
    ["GET", "/api/v1/health", "only the inference routes"],
    ["GET", "/api/v1/stats", "only the inference routes"],
    // Loaded models are listed; nothing else of Ollama's, nor under another method.
    ["POST", "/api/ps", "only the inference routes"],
    ["GET", "/api/ps/x", "only the inference routes"],
    ["GET", "/api/tags", "only the inference routes"],
    ["POST", "/api/show", "only the inference routes"],
    ["GET", "/metrics", "only the inference routes"],
    ["GET", "/health", "only the inference routes"],
    ["GET", "/", "only the inference routes"],
    // The right path with the wrong method.
    ["GET", "/v1/chat/completions", "only the inference routes"],
    ["GET", "/tokenize", "only the inference routes"],
    ["POST", "/tokenize/x", "only the inference routes"],
    ["POST", "/v1/models", "only the inference routes"],
    ["DELETE", "/v1/models/tiny", "only the inference routes"],
    ["post", "/v1/chat/completions", "only the inference routes"],
    ["OPTIONS", "/v1/chat/completions", "only the inference routes"],
    // Dot segments, plain and encoded, that the URL parser would resolve.
    ["POST", "/v1/../api/v1/load", "changes when normalized"],
    ["GET", "/v1/models/../../api/status", "changes when normalized"],
    ["POST", "/v1/./chat/completions", "changes when normalized"],
    ["POST", "/v1/%2e%2e/api/v1/load", "changes when normalized"],
    ["POST", "/v1/%2E%2E/api/v1/load", "changes when normalized"],
    ["GET", "/v1/models/.%2e/.%2e/api/status", "changes when normalized"],
    // Encoded separators and dots a decoding router would turn into structure.
    ["GET", "/v1/models/x%2F..%2F..%2Fapi%2Fstatus", "dot segment or a percent-encoded separator"],
    ["GET", "/v1/models/%2e", "changes when normalized"],
    ["GET", "/v1/models/a%5c..%5capi", "dot segment or a percent-encoded separator"],
    ["GET", "/v1/models/a%00b", "dot segment or a percent-encoded separator"],
    ["POST", "/v1/chat%2Fcompletions", "only the inference routes"],
    ["GET", "/v1/models/%zz", "bad percent-encoding"],
    // Not a plain origin-form path.
    ["GET", "//api/status", "not a plain origin-form path"],
    ["GET", "http://evil.example/v1/models", "not a plain origin-form path"],
    ["GET", "v1/models", "not a plain origin-form path"],
    ["GET", "", "characters"],
    ["GET", "/v1//models", "dot segment or a percent-encoded separator"],
    ["GET", "/v1/models//x", "dot segment or a percent-encoded separator"],
    ["GET", "/v1\\..\\api\\status", "a character a plain path does not hold"],
    ["GET", "/v1/models#/api/status", "a character a plain path does not hold"],
    ["GET", "/v1/models /api", "a character a plain path does not hold"],
    ["GET", "/v1/models\n/api", "a character a plain path does not hold"],
    ["GET", "/v1/modelé", "a character a plain path does not hold"],
    // Queries and trailing slashes.
    ["GET", "/api/status?/v1/models", "only the inference routes"],
    ["POST", "/v1/chat/completions/", "only the inference routes"],
    ["GET", "/v1/models/", "only the inference routes"],
    ["GET", "/v1/models/x/", "only the inference routes"],
    ["GET", "/V1/models", "only the inference routes"],
    // Bounded length.
    ["GET", `/v1/models/${"a".repeat(MAX_MEMBER_PATH)}`, `at most ${MAX_MEMBER_PATH}`],
  ];
  test.each(refused)("%s %s is refused", (method, path, reason) => {
    const verdict = memberMayRequest(method, path);
    expect(verdict.ok).toBe(false);
    expect(!verdict.ok && verdict.reason).toContain(reason);
  });

  test("the member inference paths are the router's inference routes", () => {
    expect([...MEMBER_INFERENCE_PATHS].sort()).toEqual([...INFERENCE_PATHS].sort());
  });
});
