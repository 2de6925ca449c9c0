import { describe, expect, test } from "bun:test";
import { affinityKey } from "../../router/serving/affinity.ts";

const noHeaders = () => undefined;
const headers = (h: Record<string, string>) => (name: string) => h[name];
const sys = { role: "system", content: "You are terse." };
const u1 = { role: "user", content: "What is a mesh?" };
const a1 = { role: "assistant", content: "A network." };
const u2 = { role: "user", content: "And a replica?" };

describe("which key a request gets", () => {
  test.each<[string, unknown, Record<string, string>, string | RegExp | undefined]>([
    ["a session header first, over the user", { user: "bob", messages: [u1] }, { "x-session-id": "s-1" }, "s:s-1"],
    ["the mesh's own session header", { messages: [u1] }, { "x-mesh-session": "s-2" }, "s:s-2"],
    ["an empty session header is none", { user: "bob" }, { "x-session-id": " " }, "u:bob"],
    ["OpenAI's user", { user: "bob", messages: [u1] }, {}, "u:bob"],
    ["Anthropic's metadata.user_id", { metadata: { user_id: "carol" }, messages: [u1] }, {}, "u:carol"],
    ["a user that is no string is ignored", { user: 42, messages: [u1] }, {}, /^c:/],
    ["a chat: its opening's hash", { messages: [sys, u1] }, {}, /^c:[0-9a-z]+$/],
    ["a completion: its prompt's start", { prompt: "Once upon a time" }, {}, /^p:[0-9a-z]+$/],
    ["a prompt of token ids", { prompt: [1, 2, 3] }, {}, /^p:/],
    ["a list of prompts: the first", { prompt: ["Once", "Twice"] }, {}, /^p:/],
    ["an embedding's input: none (no prefix to reuse)", { input: "text" }, {}, undefined],
    ["no messages, no prompt: none", { model: "m" }, {}, undefined],
    ["an empty chat: none", { messages: [] }, {}, undefined],
    ["a body that is no object: none", "text", {}, undefined],
  ])("%s", (_, body, h, expected) => {
    const key = affinityKey(body, headers(h));
    if (expected instanceof RegExp) expect(key).toMatch(expected);
    else expect(key).toBe(expected);
  });

  test("ids are cut at 256 chars", () => {
    expect(affinityKey({ user: "x".repeat(10_000) }, noHeaders)).toBe(`u:${"x".repeat(256)}`);
  });
});

describe("a conversation keeps its key from turn to turn", () => {
  const key = (body: unknown) => affinityKey(body, noHeaders);
  test.each<[string, unknown, unknown, boolean]>([
    ["the next turn repeats the opening: same key", { messages: [sys, u1] }, { messages: [sys, u1, a1, u2] }, true],
    ["no system prompt, next turn: same key", { messages: [u1] }, { messages: [u1, a1, u2] }, true],
    ["Anthropic's top-level system, next turn: same key", { system: "terse", messages: [u1] }, { system: "terse", messages: [u1, a1, u2] }, true],
    ["another first question: another key", { messages: [sys, u1] }, { messages: [sys, u2] }, false],
    ["another system prompt: another key", { messages: [sys, u1] }, { messages: [{ role: "system", content: "Be verbose." }, u1] }, false],
    ["Anthropic's system differs: another key", { system: "terse", messages: [u1] }, { system: "verbose", messages: [u1] }, false],
    ["text parts read as their text", { messages: [{ role: "user", content: [{ type: "text", text: "hi" }] }] }, { messages: [{ role: "user", content: [{ type: "text", text: "ho" }] }] }, false],
    [
      "images told apart by their ends and length, even with the same start",
      { messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: `data:image/png;base64,${"A".repeat(1000)}X` } }] }] },
      { messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: `data:image/png;base64,${"A".repeat(1000)}Y` } }] }] },
      false,
    ],
    ["roles count: a user's words are not a system's", { messages: [{ role: "system", content: "x" }, u1] }, { messages: [{ role: "user", content: "x" }, u1] }, false],
    ["the same prompt start: same key, whatever follows 512 chars in", { prompt: `${"a".repeat(512)}one` }, { prompt: `${"a".repeat(512)}two` }, true],
  ])("%s", (_, a, b, same) => {
    expect(key(a) === key(b)).toBe(same);
  });
});

test("work is bounded: a huge body's key comes from its start, fast", () => {
  const huge = "y".repeat(32 * 2 ** 20);
  const parts = Array.from({ length: 100_000 }, () => ({ type: "text", text: "z" }));
  const messages = [{ role: "system", content: huge }, { role: "user", content: parts }, ...Array.from({ length: 100_000 }, () => u2)];
  const started = performance.now();
  const key = affinityKey({ messages }, noHeaders);
  expect(key).toMatch(/^c:/);
  // Only the bounded start is read: another tail gives the same key.
  expect(affinityKey({ messages: [{ role: "system", content: `${huge}different` }, u1] }, noHeaders)).toBe(key);
  expect(performance.now() - started).toBeLessThan(1000);
});
