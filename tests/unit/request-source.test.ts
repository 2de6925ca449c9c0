import { expect, test } from "bun:test";
import { FORWARDED_HEADER } from "../../mesh/http-stream.ts";
import { requestSource, takesSlot } from "../../router/request-source.ts";

const headers = (h: Record<string, string>) => new Headers(h);

test.each([
  ["a member's request waits in that member's turn", { [FORWARDED_HEADER]: "abcdef0123" }, "member:abcdef0123"],
  ["a member whose id was not passed on", { [FORWARDED_HEADER]: "1" }, "member"],
  ["a forwarded request's key is not its turn: the member's is", { [FORWARDED_HEADER]: "n1", authorization: "Bearer k1" }, "member:n1"],
  ["nothing: local", {}, "local"],
] as [string, Record<string, string>, string][])("%s", (_name, h, want) => expect(requestSource(headers(h))).toBe(want));

test("a key is its own turn, named by a hash: the same key the same turn, another key another, the key itself nowhere", () => {
  const a = requestSource(headers({ authorization: "Bearer secret-a" }));
  expect(a).toMatch(/^key:[0-9a-f]{16}$/);
  expect(a).not.toContain("secret-a");
  expect(requestSource(headers({ "x-api-key": "secret-a" }))).toBe(a);
  expect(requestSource(headers({ authorization: "Bearer secret-b" }))).not.toBe(a);
});

test.each([
  ["/v1/chat/completions", true],
  ["/v1/completions", true],
  ["/v1/embeddings", true],
  ["/v1/messages", true],
  ["/v1/messages/count_tokens", false],
  ["/tokenize", false],
  ["/detokenize", false],
  ["/apply-template", false],
])("takesSlot(%p) = %p", (path, want) => expect(takesSlot(path)).toBe(want));
