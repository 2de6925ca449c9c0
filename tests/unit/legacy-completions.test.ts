/**
 * Legacy text completions in OpenAI's words: what a request becomes for llama-server (and what is
 * refused), and llama-server's chat-shaped logprobs turned into the legacy ones, whole and chunk by
 * chunk, with the prompt echoed.
 */
import { describe, expect, test } from "bun:test";
import { completionsRequest, legacyAnswer, legacyLogprobs, type CompletionsPlan, type CompletionsState } from "../../router/dialects/legacy-completions.ts";
import type { Json, JsonObject } from "../../router/http/json.ts";

describe("completionsRequest", () => {
  test.each<[string, JsonObject, JsonObject | undefined, Partial<CompletionsPlan> | undefined]>([
    ["no logprobs, no echo: passes as it is", { model: "m", prompt: "p" }, undefined, undefined],
    ["logprobs null: passes", { model: "m", prompt: "p", logprobs: null }, undefined, undefined],
    ["logprobs N: n_probs N", { model: "m", prompt: "p", logprobs: 3 }, { model: "m", prompt: "p", n_probs: 3 }, { logprobs: 3, echo: undefined, prompts: ["p"] }],
    ["logprobs 0: one probability asked, the sampled token's", { model: "m", prompt: "p", logprobs: 0 }, { model: "m", prompt: "p", n_probs: 1 }, { logprobs: 0 }],
    ["logprobs wins over a client's n_probs and post_sampling_probs", { model: "m", prompt: "p", logprobs: 2, n_probs: 9, post_sampling_probs: true }, { model: "m", prompt: "p", n_probs: 2 }, { logprobs: 2 }],
    ["echo: left out, the prompts kept for the answer", { model: "m", prompt: ["a", "b"], echo: true, n: 2 }, { model: "m", prompt: ["a", "b"], n: 2 }, { echo: ["a", "b"], perPrompt: 2 }],
    ["echo false: left out (older servers refuse the field)", { model: "m", prompt: "p", echo: false }, { model: "m", prompt: "p" }, { echo: undefined, logprobs: undefined }],
    ["a prompt of tokens: no text to offset from", { model: "m", prompt: [1, 2, 3], logprobs: 1 }, { model: "m", prompt: [1, 2, 3], n_probs: 1 }, { prompts: [undefined] }],
  ])("%s", (_, body, sent, plan) => {
    const out = completionsRequest(body);
    if (sent === undefined) return expect(out).toBeUndefined();
    expect(out).toMatchObject({ body: sent, plan: plan! });
    expect((out as { body: JsonObject }).body).toEqual(sent);
  });

  test.each<[string, JsonObject, string]>([
    ["echo with logprobs: prompt logprobs llama.cpp does not give", { prompt: "p", echo: true, logprobs: 1 }, "llama.cpp's server gives them only for the tokens it generates"],
    ["echo of a prompt in tokens", { prompt: [1, 2], echo: true }, "echo needs the prompt as text"],
    ["logprobs true (the chat API's word)", { prompt: "p", logprobs: true }, "an integer from 0 to 20 (got true)"],
    ["logprobs over the limit", { prompt: "p", logprobs: 21 }, "(got 21)"],
    ["logprobs negative", { prompt: "p", logprobs: -1 }, "(got -1)"],
    ["logprobs not whole", { prompt: "p", logprobs: 1.5 }, "(got 1.5)"],
    ["echo not a boolean", { prompt: "p", echo: "yes" }, '"echo" must be true or false'],
  ])("refused: %s", (_, body, words) => {
    const out = completionsRequest({ model: "m", ...body });
    expect(out).toHaveProperty("error");
    expect((out as { error: string }).error).toContain(words);
  });
});

/** One token as llama-server gives it, with its alternatives. */
const entry = (token: string, logprob: number, top: [string, number][]): Json => ({
  id: 1,
  token,
  bytes: [],
  logprob,
  top_logprobs: top.map(([t, l]) => ({ id: 2, token: t, bytes: [], logprob: l })),
});

describe("legacyLogprobs", () => {
  test.each<[string, Json, number, number, JsonObject | undefined, number]>([
    ["none given", null, 2, 0, undefined, 0],
    [
      "two tokens, top 2, offsets from 5",
      [entry(" a", -1, [[" a", -1], [" b", -2], [" c", -3]]), entry("bc", -0.5, [["bc", -0.5]])],
      2,
      5,
      { tokens: [" a", "bc"], token_logprobs: [-1, -0.5], top_logprobs: [{ " a": -1, " b": -2 }, { bc: -0.5 }], text_offset: [5, 7] },
      9,
    ],
    [
      "the sampled token added when not among the top (N + 1 entries)",
      [entry("z", -4, [["x", -1], ["y", -2]])],
      2,
      0,
      { tokens: ["z"], token_logprobs: [-4], top_logprobs: [{ x: -1, y: -2, z: -4 }], text_offset: [0] },
      1,
    ],
    ["top 0: the sampled token only", [entry("q", -3, [["r", -1]])], 0, 0, { tokens: ["q"], token_logprobs: [-3], top_logprobs: [{ q: -3 }], text_offset: [0] }, 1],
    ["offsets count code points", [entry("é😀", -1, []), entry("x", -1, [])], 1, 0, { text_offset: [0, 2] }, 3],
  ])("%s", (_, content, top, offset, logprobs, end) => {
    const out = legacyLogprobs(content, top, offset);
    if (logprobs === undefined) return expect(out).toBeUndefined();
    expect(out!.logprobs).toMatchObject(logprobs);
    expect(out!.end).toBe(end);
  });
});

const plan = (p: Partial<CompletionsPlan>): CompletionsPlan => ({ logprobs: undefined, echo: undefined, perPrompt: 1, prompts: ["Hi"], ...p });

describe("legacyAnswer", () => {
  test("a whole answer: legacy logprobs, offsets after the prompt", () => {
    const answer = { object: "text_completion", choices: [{ index: 0, text: " a", finish_reason: "length", logprobs: { content: [entry(" a", -1, [[" a", -1]])] } }] };
    expect(legacyAnswer(answer, plan({ logprobs: 1 }))).toEqual({
      object: "text_completion",
      choices: [{ index: 0, text: " a", finish_reason: "length", logprobs: { tokens: [" a"], token_logprobs: [-1], top_logprobs: [{ " a": -1 }], text_offset: [2] } }],
    });
  });

  test("a whole answer echoed, each choice after its own prompt", () => {
    const answer = { choices: [0, 1, 2, 3].map((index) => ({ index, text: `+${index}` })) };
    const out = legacyAnswer(answer, plan({ echo: ["A", "B"], prompts: ["A", "B"], perPrompt: 2 })) as { choices: { text: string }[] };
    expect(out.choices.map((c) => c.text)).toEqual(["A+0", "A+1", "B+2", "B+3"]);
  });

  test("a stream: the prompt before the first chunk only, offsets carried from chunk to chunk, the last chunk's null kept", () => {
    const states: CompletionsState = new Map();
    const p = plan({ echo: ["Hi"], logprobs: undefined });
    const chunks = [{ choices: [{ index: 0, text: " a", logprobs: null }] }, { choices: [{ index: 0, text: "b", logprobs: null }] }];
    expect(chunks.map((c) => (legacyAnswer(c, p, states) as { choices: { text: string }[] }).choices[0]!.text)).toEqual(["Hi a", "b"]);

    const lp = plan({ logprobs: 1 });
    const lpStates: CompletionsState = new Map();
    const stream = [
      { choices: [{ index: 0, text: " a", logprobs: { content: [entry(" a", -1, [])] } }] },
      { choices: [{ index: 0, text: "bc", logprobs: { content: [entry("bc", -2, [])] } }] },
      { choices: [{ index: 0, text: "", logprobs: null, finish_reason: "length" }] },
    ];
    const out = stream.map((c) => (legacyAnswer(c, lp, lpStates) as { choices: { logprobs: Json }[] }).choices[0]!.logprobs);
    expect(out).toEqual([
      { tokens: [" a"], token_logprobs: [-1], top_logprobs: [{ " a": -1 }], text_offset: [2] },
      { tokens: ["bc"], token_logprobs: [-2], top_logprobs: [{ bc: -2 }], text_offset: [4] },
      null,
    ]);
  });

  test.each<[string, Json]>([
    ["an error", { error: { message: "x" } }],
    ["not an object", "text"],
  ])("%s passes as it came", (_, answer) => expect(legacyAnswer(answer, plan({ logprobs: 1 }))).toEqual(answer));
});
