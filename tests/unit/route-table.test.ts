/** Which methods each path answers (405 with Allow vs 404), the load error for a model of the mesh, and the bounded copy of a passing answer. */
import { expect, test } from "bun:test";
import { figuresOfKept, keepLast, SSE_TAIL_BYTES, TailKeeper } from "../../router/serving/passing-stats.ts";
import { isManagementPath } from "../../router/dialects/no-route.ts";
import { allowedMethods, asApiV1, INFERENCE_PATHS } from "../../router/http/route-table.ts";
import { notOnThisNode } from "../../router/serving/serving.ts";

test.each<[string, readonly string[] | undefined]>([
  ["/v1/chat/completions", ["POST"]],
  ["/v1/responses", ["POST"]],
  ["/v1/messages", ["POST"]],
  ["/v1/messages/count_tokens", ["POST"]],
  ["/tokenize", ["POST"]],
  ["/detokenize", ["POST"]],
  ["/apply-template", ["POST"]],
  ["/v1/models", ["GET", "HEAD"]],
  ["/v1/models/tiny-q8_0", ["GET", "HEAD"]],
  ["/health", ["GET", "HEAD"]],
  ["/metrics", ["GET", "HEAD"]],
  ["/api/status", ["GET", "HEAD"]],
  ["/live", ["GET", "HEAD"]],
  // Ollama's routes.
  ["/api/version", ["GET", "HEAD"]],
  ["/api/tags", ["GET", "HEAD"]],
  ["/api/ps", ["GET", "HEAD"]],
  ["/api/show", ["POST"]],
  ["/api/chat", ["POST"]],
  ["/api/generate", ["POST"]],
  ["/api/embed", ["POST"]],
  ["/api/embeddings", ["POST"]],
  ["/api/pull", ["POST"]],
  ["/api/delete", ["POST", "DELETE"]],
  ["/api/push", ["POST", "DELETE"]],
  // The management API and the OpenAI routes under Lemonade's base URL.
  ["/api/v1/health", ["GET", "HEAD"]],
  ["/api/v1/stats", ["GET", "HEAD"]],
  ["/api/v1/system-info", ["GET", "HEAD"]],
  ["/api/v1/load", ["POST"]],
  ["/api/v1/unload", ["POST"]],
  ["/api/v1/pull", ["POST"]],
  ["/api/v1/delete", ["POST"]],
  ["/api/v1/models", ["GET", "HEAD"]],
  ["/api/v1/models/tiny-q8_0", ["GET", "HEAD"]],
  ["/api/v1/chat/completions", ["POST"]],
  ["/api/v1/responses", ["POST"]],
  // Lemonade's other base URLs answer the same routes.
  ["/api/v0/health", ["GET", "HEAD"]],
  ["/api/v0/unload", ["POST"]],
  ["/api/v0/models/tiny-q8_0", ["GET", "HEAD"]],
  ["/api/v0/chat/completions", ["POST"]],
  ["/v0/health", ["GET", "HEAD"]],
  ["/v0/system-info", ["GET", "HEAD"]],
  ["/v0/load", ["POST"]],
  ["/v0/unload", ["POST"]],
  ["/v0/models", ["GET", "HEAD"]],
  ["/v0/embeddings", ["POST"]],
  ["/v0/nope", undefined],
  ["/v0/tokenize", undefined],
  ["/v0", undefined],
  ["/api/v0", undefined],
  ["/v00/health", undefined],
  ["/api/v2/health", undefined],
  // Unknown paths stay 404.
  ["/api/v1/nope", undefined],
  ["/api/v1/models/", undefined],
  ["/api/v1/tokenize", undefined],
  ["/api/nope", undefined],
  ["/api/chat/", undefined],
  ["/v1/models/", undefined],
  ["/v1/nope", undefined],
  ["/v1/tokenize", undefined],
  ["/v1/chat/completions/", undefined],
  ["/", undefined],
])("allowedMethods(%p) = %p", (path, methods) => expect(allowedMethods(path)).toEqual(methods));

test.each<[string, boolean]>([
  ["/api/v1", true],
  ["/api/v1/load", true],
  ["/api/v1/nope", true],
  ["/api/v10", false],
  ["/api/v0", true],
  ["/api/v0/unload", true],
  ["/v0/nope", true],
  ["/v00", false],
  ["/api/chat", false],
  ["/v1/models", false],
])("isManagementPath(%p) = %p (Lemonade's error shape)", (path, yes) => expect(isManagementPath(path)).toBe(yes));

test.each<[string, string]>([
  ["/api/v0/unload", "/api/v1/unload"],
  ["/v0/chat/completions", "/api/v1/chat/completions"],
  ["/v0", "/api/v1"],
  ["/api/v1/load", "/api/v1/load"],
  ["/v01/load", "/v01/load"],
  ["/v1/models", "/v1/models"],
  ["/api/chat", "/api/chat"],
])("asApiV1(%p) = %p", (path, asV1) => expect(asApiV1(path)).toBe(asV1));

test("every inference path is POST only", () => {
  for (const p of INFERENCE_PATHS) expect(allowedMethods(p)).toEqual(["POST"]);
});

test.each<[string | undefined, string]>([
  ["0123456789abcdef", "the mesh serves it on node 0123456789"],
  [undefined, "no node serves it now"],
])("notOnThisNode(servedBy %p) says where and how", (servedBy, where) => {
  const msg = notOnThisNode("m", servedBy);
  expect(msg).toContain(`model "m" is not on this node's disk`);
  expect(msg).toContain(where);
  expect(msg).toContain("--model m and --join");
});

const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);
test.each<[string, string, number, string]>([
  ["", "abc", 8, "abc"],
  ["abc", "def", 8, "abcdef"],
  ["abc", "def", 4, "cdef"],
  ["abc", "defghij", 4, "ghij"],
  ["abcdefgh", "", 4, "efgh"],
])("keepLast(%p, %p, %d) = %p", (kept, chunk, max, out) => expect(dec(keepLast(enc(kept), enc(chunk), max))).toBe(out));

test("figures of what was kept: SSE tail, whole JSON, or none for a JSON body cut short", () => {
  const kept = (...chunks: string[]) => {
    const k = new TailKeeper(SSE_TAIL_BYTES);
    for (const c of chunks) k.push(enc(c));
    return k;
  };
  const json = kept('{"usage":{"prompt_tokens":3,"completion_tokens":2}}');
  expect(figuresOfKept(json, false, true).usage).toEqual({ prompt_tokens: 3, completion_tokens: 2 });
  expect(figuresOfKept(json, false, false).usage).toBeUndefined();
  const sse = kept('data: {"timings":{"predicted_n":4}}\n\n', "data: [DONE]\n\n");
  expect(figuresOfKept(sse, true, false).timings).toEqual({ predicted_n: 4 });
  // A final event longer than the few KiB read first: all that was kept is read.
  const long = kept('data: {"choices":[{"text":"x"}]}\n\n', `data: {"timings":{"predicted_n":9},"text":"${"y".repeat(6000)}"}\n\n`, "data: [DONE]\n\n");
  expect(figuresOfKept(long, true, false).timings).toEqual({ predicted_n: 9 });
});
