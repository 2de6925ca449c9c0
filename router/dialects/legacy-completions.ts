/**
 * OpenAI's legacy text completions (`/v1/completions`) as its clients and evaluation harnesses read
 * them (pure). llama-server answers `logprobs: N` in the chat shape (`logprobs.content[]`), answers
 * `logprobs: 0` with none at all, and leaves `echo` out (or refuses it). Here the request asks
 * llama-server in its own words (`n_probs`), and each answer, whole or chunk by chunk, is turned
 * into the legacy shape: `tokens`, `token_logprobs`, `top_logprobs` (one `{token: logprob}` map per
 * token, the sampled token always in it, as OpenAI does) and `text_offset`, with the prompt before
 * the text when echoed. llama.cpp gives no logprobs for prompt tokens, so echo with logprobs is
 * refused rather than answered with made-up entries.
 */
import { rewriteAnswer } from "./answer-rewrite.ts";
import type { Translator } from "./translation.ts";
import { isObject, type Json, type JsonObject } from "../http/json.ts";

/** The most top tokens a request may ask for (OpenAI's legacy limit is 5; vLLM's and llama.cpp's are higher). */
export const MAX_LOGPROBS = 20;

/** What the answer needs from the request. */
export interface CompletionsPlan {
  /** Top tokens per token (0: the sampled token only); undefined: no logprobs asked. */
  logprobs: number | undefined;
  /** The prompt text of each prompt, echoed before its choices' text; undefined: no echo. */
  echo: string[] | undefined;
  /** Choices per prompt (`n`). */
  perPrompt: number;
  /** The prompt text of each prompt, for offsets from the start of prompt and completion; undefined where a prompt is tokens. */
  prompts: (string | undefined)[];
}

/** The prompts as text, one per prompt llama-server answers; undefined where one is given as token ids. */
function promptTexts(prompt: Json | undefined): (string | undefined)[] {
  if (typeof prompt === "string") return [prompt];
  if (!Array.isArray(prompt) || prompt.length === 0) return [undefined];
  // A list of numbers is one prompt in tokens; a list of strings (or token lists) is several prompts.
  if (prompt.every((p) => typeof p === "number")) return [undefined];
  return prompt.map((p) => (typeof p === "string" ? p : undefined));
}

/**
 * The request llama-server is sent and what its answer needs; undefined when it passes as it is
 * (no logprobs, no echo); the reason when it cannot be served.
 */
export function completionsRequest(body: JsonObject): { body: JsonObject; plan: CompletionsPlan } | { error: string } | undefined {
  const { logprobs, echo } = body;
  const asked = logprobs !== undefined && logprobs !== null;
  if (asked && (typeof logprobs !== "number" || !Number.isInteger(logprobs) || logprobs < 0 || logprobs > MAX_LOGPROBS)) {
    return { error: `"logprobs" on /v1/completions is how many of the most likely tokens to return for each token: an integer from 0 to ${MAX_LOGPROBS} (got ${JSON.stringify(logprobs)})` };
  }
  if (echo !== undefined && echo !== null && typeof echo !== "boolean") return { error: `"echo" must be true or false (got ${JSON.stringify(echo)})` };
  if (!asked && echo === undefined) return undefined;
  const prompts = promptTexts(body.prompt);
  if (echo === true && asked) {
    return {
      error:
        "echo with logprobs asks for the logprobs of the prompt's tokens, and llama.cpp's server gives them only for the tokens it generates; send echo without logprobs (the prompt comes back before the text), or logprobs without echo",
    };
  }
  if (echo === true && prompts.some((p) => p === undefined)) {
    return { error: "echo needs the prompt as text (a string or a list of strings): a prompt of token ids cannot be echoed; send it as text, or leave echo out" };
  }
  const n = typeof body.n === "number" && Number.isInteger(body.n) && body.n > 0 ? body.n : 1;
  const sent: JsonObject = { ...body };
  delete sent.echo;
  delete sent.logprobs;
  if (asked) {
    // llama-server's own field: it reads `logprobs` only when `n_probs` is absent, and 0 there means none at all.
    sent.n_probs = Math.max(1, logprobs as number);
    // Its probabilities after sampling come in another shape (`prob`, `top_probs`): logprobs are what was asked.
    delete sent.post_sampling_probs;
  }
  return { body: sent, plan: { logprobs: asked ? (logprobs as number) : undefined, echo: echo === true ? (prompts as string[]) : undefined, perPrompt: n, prompts } };
}

/** Characters as OpenAI counts them (code points), for `text_offset`. */
const chars = (s: string) => [...s].length;

/** The legacy logprobs of one answer's tokens (llama-server's `logprobs.content`), offsets from `offset` on; undefined when it gave none. */
export function legacyLogprobs(content: Json | undefined, top: number, offset: number): { logprobs: JsonObject; end: number } | undefined {
  if (!Array.isArray(content)) return undefined;
  const tokens: string[] = [];
  const tokenLogprobs: (number | null)[] = [];
  const topLogprobs: JsonObject[] = [];
  const textOffset: number[] = [];
  let at = offset;
  for (const entry of content) {
    if (!isObject(entry)) continue;
    const token = typeof entry.token === "string" ? entry.token : "";
    const logprob = typeof entry.logprob === "number" ? entry.logprob : null;
    const map: JsonObject = {};
    const alternatives = Array.isArray(entry.top_logprobs) ? entry.top_logprobs : [];
    for (const alt of alternatives.slice(0, top)) {
      if (isObject(alt) && typeof alt.token === "string" && typeof alt.logprob === "number" && !(alt.token in map)) map[alt.token] = alt.logprob;
    }
    // OpenAI always gives the sampled token's logprob among them (up to N + 1 entries).
    if (!(token in map) && logprob !== null) map[token] = logprob;
    tokens.push(token);
    tokenLogprobs.push(logprob);
    topLogprobs.push(map);
    textOffset.push(at);
    at += chars(token);
  }
  return { logprobs: { tokens, token_logprobs: tokenLogprobs, top_logprobs: topLogprobs, text_offset: textOffset }, end: at };
}

/** Per choice of one answer: where its next token's offset is, and whether its prompt was echoed. */
export interface ChoiceState {
  offset: number;
  echoed: boolean;
}

export type CompletionsState = Map<number, ChoiceState>;

const promptOf = (plan: CompletionsPlan, index: number) => plan.prompts[Math.floor(index / plan.perPrompt)];

/** One choice (of a whole answer or a chunk) in the legacy shape; `states` carries each choice from chunk to chunk. */
function legacyChoice(choice: Json, plan: CompletionsPlan, states: CompletionsState): Json {
  if (!isObject(choice)) return choice;
  const index = typeof choice.index === "number" ? choice.index : 0;
  // Only the choices the request asked for carry state (the answer may come from a member, with any index).
  if (!Number.isInteger(index) || index < 0 || index >= plan.perPrompt * Math.max(1, plan.prompts.length)) return choice;
  const prompt = promptOf(plan, index);
  // Offsets count from the start of the prompt, as OpenAI's do, where the prompt is text.
  const state = states.get(index) ?? { offset: prompt === undefined ? 0 : chars(prompt), echoed: false };
  states.set(index, state);
  const out: JsonObject = { ...choice };
  if (plan.echo && !state.echoed) {
    out.text = `${prompt ?? ""}${typeof choice.text === "string" ? choice.text : ""}`;
    state.echoed = true;
  }
  if (plan.logprobs !== undefined) {
    const content = isObject(choice.logprobs) ? choice.logprobs.content : undefined;
    const mapped = legacyLogprobs(content, plan.logprobs, state.offset);
    if (mapped) {
      out.logprobs = mapped.logprobs;
      state.offset = mapped.end;
    }
  }
  return out;
}

/** A whole answer, or one chunk of a streamed one, in the legacy shape (an answer without choices, an error, as it came). */
export function legacyAnswer(answer: Json, plan: CompletionsPlan, states: CompletionsState = new Map()): Json {
  if (!isObject(answer) || !Array.isArray(answer.choices)) return answer;
  return { ...answer, choices: answer.choices.map((c) => legacyChoice(c, plan, states)) };
}

/** `/v1/completions` in llama-server's words, its answers in OpenAI's legacy ones. */
export const completionsTranslator: Translator = (body) => {
  const request = completionsRequest(body);
  if (request === undefined || "error" in request) return request;
  const { plan } = request;
  return {
    path: "/v1/completions",
    body: request.body,
    answer: (res) =>
      rewriteAnswer(res, {
        whole: (json) => legacyAnswer(json, plan),
        stream: () => {
          const states: CompletionsState = new Map();
          return (_, data) => {
            const out = legacyAnswer(data, plan, states);
            return out === data ? undefined : (out as JsonObject);
          };
        },
      }),
  };
};
