import { expect, test } from "bun:test";
import { Hono } from "hono";
import { requireApiKey } from "../../router/http/api-keys.ts";
import { requestSource, takesSlot } from "../../router/serving/request-source.ts";
import { FORWARDED_HEADER } from "../../mesh/mesh-headers.ts";

const headers = (h: Record<string, string>) => new Headers(h);

test.each([
  ["a member's request waits in that member's turn", { [FORWARDED_HEADER]: "abcdef0123" }, "member:abcdef0123"],
  ["a member whose id was not passed on", { [FORWARDED_HEADER]: "1" }, "member"],
  ["a forwarded request's key is not its turn: the member's is", { [FORWARDED_HEADER]: "n1", authorization: "Bearer k1" }, "member:n1"],
  ["nothing: local", {}, "local"],
] as [string, Record<string, string>, string][])("%s", (_name, h, want) => expect(requestSource(headers(h), undefined)).toBe(want));

/** The turn a request gets behind the node's key check, as the inference routes see it. */
async function sourceBehind(keys: string[], h: Record<string, string>): Promise<string> {
  const app = new Hono();
  app.use("*", requireApiKey(keys));
  app.get("/", (c) => c.text(requestSource(c.req.raw.headers, c.get("acceptedKey"))));
  return (await app.request("/", { headers: h })).text();
}

test("with --api-key, a key is its own turn, named by a hash: the same key the same turn, another key another, the key itself nowhere", async () => {
  const keys = ["secret-a", "secret-b"];
  const a = await sourceBehind(keys, { authorization: "Bearer secret-a" });
  expect(a).toMatch(/^key:[0-9a-f]{16}$/);
  expect(a).not.toContain("secret-a");
  expect(await sourceBehind(keys, { "x-api-key": "secret-a" })).toBe(a);
  expect(await sourceBehind(keys, { authorization: "Bearer secret-b" })).not.toBe(a);
});

test("with no --api-key, a bearer value is the client's to invent: every one waits in the local turn", async () => {
  expect(await sourceBehind([], { authorization: "Bearer made-up-1" })).toBe("local");
  expect(await sourceBehind([], { "x-api-key": "made-up-2" })).toBe("local");
});

test("a key accepted at Lemonade's /api/v1 keeps its turn in the /v1 route that answers it", async () => {
  const v1 = new Hono();
  v1.post("/chat/completions", (c) => c.text(requestSource(c.req.raw.headers, c.get("acceptedKey"))));
  const app = new Hono();
  app.use("*", requireApiKey(["secret-a"]));
  app.route("/api/v1", v1);
  const got = await (await app.request("/api/v1/chat/completions", { method: "POST", headers: { authorization: "Bearer secret-a" }, body: "{}" })).text();
  expect(got).toBe(await sourceBehind(["secret-a"], { authorization: "Bearer secret-a" }));
});

test("a key no check accepted is no turn of its own", () => expect(requestSource(headers({ authorization: "Bearer secret-a" }), undefined)).toBe("local"));

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
