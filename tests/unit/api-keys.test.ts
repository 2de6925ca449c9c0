import { expect, test } from "bun:test";
import { fromOutside, keyMatches, presentedKey } from "../../router/http/api-keys.ts";
import { FORWARDED_HEADER } from "../../mesh/mesh-headers.ts";

test.each<[string, Record<string, string>, string | undefined]>([
  ["a bearer token", { authorization: "Bearer sk-1" }, "sk-1"],
  ["the scheme in any case, spaces around", { authorization: "  bearer   sk-2 " }, "sk-2"],
  ["Anthropic's x-api-key", { "x-api-key": "sk-3" }, "sk-3"],
  ["basic auth is not a key", { authorization: "Basic dTpw" }, undefined],
  ["nothing", {}, undefined],
])("presented key: %s", (_, headers, key) => expect(presentedKey(new Headers(headers))).toBe(key));

test.each<[string, string[], boolean]>([
  ["k1", ["k1", "k2"], true],
  ["k2", ["k1", "k2"], true],
  ["k", ["k1", "k2"], false],
  ["k1 ", ["k1"], false],
  ["", ["k1"], false],
])("key %p against %p", (key, keys, ok) => expect(keyMatches(key, keys)).toBe(ok));

test("a request from outside loses the forwarded marker; others pass untouched", () => {
  const spoofed = new Request("http://x/v1/models", { headers: { [FORWARDED_HEADER]: "1", authorization: "Bearer a" } });
  const cleaned = fromOutside(spoofed);
  expect(cleaned.headers.has(FORWARDED_HEADER)).toBe(false);
  expect(cleaned.headers.get("authorization")).toBe("Bearer a");
  const plain = new Request("http://x/health");
  expect(fromOutside(plain)).toBe(plain);
});

test("the marker goes even when it is the only header, and a body comes along", async () => {
  const alone = fromOutside(new Request("http://x/v1/models", { headers: { [FORWARDED_HEADER]: "1" } }));
  expect([...alone.headers.keys()]).toEqual([]);
  const post = fromOutside(new Request("http://x/v1/completions", { method: "POST", body: '{"model":"m"}', headers: { [FORWARDED_HEADER]: "1" } }));
  expect(post.headers.has(FORWARDED_HEADER)).toBe(false);
  expect(post.method).toBe("POST");
  expect(await post.text()).toBe('{"model":"m"}');
});
