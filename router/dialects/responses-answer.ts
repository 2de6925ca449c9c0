/**
 * A chat completion turned into the Responses API's answer (pure): the response object the OpenAI
 * SDKs read (`resp_` id, the requested model's name, the request's settings repeated, `usage` in
 * input/output tokens, status `incomplete` with reason `max_output_tokens` when the answer was cut
 * at the limit) and its output items: the model's thinking as a `reasoning` item, its text as a
 * `message` with one `output_text` part, each tool call as a `function_call` item. The streamed
 * answer (`responses-stream.ts`) builds the same items and the same object, event by event.
 */
import { isObject, type Json, type JsonObject } from "../http/json.ts";
import type { ResponsesEcho } from "./responses-request.ts";

/** Where an answer's ids and time come from (tests give fixed ones). */
export interface ResponseIds {
  /** The response's id (`resp_...`). */
  id: string;
  /** When the request came, in whole seconds since the epoch. */
  createdAt: number;
  /** A new id for an output item or a call, after its prefix (`msg`, `fc`, `rs`, `call`). */
  item(prefix: string): string;
  /** Now, in whole seconds since the epoch (when the answer completed). */
  now(): number;
}

const hex = () => crypto.randomUUID().replaceAll("-", "");

/** Fresh random ids, and now. */
export function newResponseIds(now = Date.now()): ResponseIds {
  return { id: `resp_${hex()}`, createdAt: Math.floor(now / 1000), item: (prefix) => `${prefix}_${hex()}`, now: () => Math.floor(Date.now() / 1000) };
}

export type ResponseStatus = "in_progress" | "completed" | "incomplete" | "failed";

const count = (v: Json | undefined) => (typeof v === "number" && Number.isFinite(v) ? v : 0);

/** A chat completion's `usage` in the Responses API's words; undefined when it gave none. */
export function usageOf(usage: Json | undefined): JsonObject | undefined {
  if (!isObject(usage)) return undefined;
  const input = count(usage.prompt_tokens);
  const output = count(usage.completion_tokens);
  const cached = isObject(usage.prompt_tokens_details) ? count(usage.prompt_tokens_details.cached_tokens) : 0;
  const reasoning = isObject(usage.completion_tokens_details) ? count(usage.completion_tokens_details.reasoning_tokens) : 0;
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: cached },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: reasoning },
    total_tokens: typeof usage.total_tokens === "number" ? usage.total_tokens : input + output,
  };
}

const utf8 = new TextEncoder();

/** A token's text past this is not one token's (the answer may come from a member): cut. */
const MAX_TOKEN_CHARS = 256;
/** A token's bytes as the server gave them (a part of a UTF-8 character has no text of its own), when they are bytes a token can have. */
const isTokenBytes = (b: Json | undefined): b is number[] => Array.isArray(b) && b.length <= 4 * MAX_TOKEN_CHARS && b.every((x) => Number.isInteger(x) && (x as number) >= 0 && (x as number) <= 255);

/** One token's logprob entry (the chat API's `{token, logprob, bytes, top_logprobs}`) as the Responses API gives it. */
function logprobEntry(entry: JsonObject): JsonObject {
  const token = typeof entry.token === "string" ? entry.token.slice(0, MAX_TOKEN_CHARS) : "";
  const bytes = isTokenBytes(entry.bytes) ? entry.bytes : [...utf8.encode(token)];
  return { token, logprob: count(entry.logprob), bytes };
}

/**
 * A chat choice's `logprobs` (`{content: [...]}`) in the Responses API's words, with at most `top`
 * alternatives per token (what the request asked for); none when it gave none.
 */
export function logprobsOf(logprobs: Json | undefined, top: number): JsonObject[] {
  if (!isObject(logprobs) || !Array.isArray(logprobs.content)) return [];
  return logprobs.content.filter(isObject).map((entry) => ({
    ...logprobEntry(entry),
    top_logprobs: (Array.isArray(entry.top_logprobs) ? entry.top_logprobs : []).filter(isObject).slice(0, top).map(logprobEntry),
  }));
}

/** The `output_text` part of a message. */
export const outputText = (text: string, logprobs: JsonObject[]): JsonObject => ({ type: "output_text", text, annotations: [], logprobs });

export const messageItem = (id: string, status: ResponseStatus, content: JsonObject[]): JsonObject => ({ id, type: "message", role: "assistant", status, content });

export const reasoningItem = (id: string, status: ResponseStatus, content: JsonObject[]): JsonObject => ({ id, type: "reasoning", summary: [], content, status });

export const reasoningText = (text: string): JsonObject => ({ type: "reasoning_text", text });

export interface CallParts {
  id: string;
  callId: string;
  name: string;
  arguments: string;
}

export const functionCallItem = (call: CallParts, status: ResponseStatus): JsonObject => ({
  id: call.id,
  type: "function_call",
  call_id: call.callId,
  name: call.name,
  arguments: call.arguments,
  status,
});

/** The response object: the request's settings, the output so far, the usage once known. */
export function responseObject(echo: ResponsesEcho, ids: ResponseIds, state: { status: ResponseStatus; output: JsonObject[]; usage?: JsonObject; error?: JsonObject }): JsonObject {
  const response: JsonObject = {
    id: ids.id,
    object: "response",
    created_at: ids.createdAt,
    status: state.status,
    background: false,
    error: state.error ?? null,
    incomplete_details: state.status === "incomplete" ? { reason: "max_output_tokens" } : null,
    instructions: echo.instructions,
    max_output_tokens: echo.max_output_tokens,
    max_tool_calls: null,
    model: echo.model,
    output: state.output,
    parallel_tool_calls: echo.parallel_tool_calls,
    previous_response_id: null,
    reasoning: echo.reasoning,
    service_tier: "default",
    store: false,
    temperature: echo.temperature,
    text: echo.text,
    tool_choice: echo.tool_choice,
    tools: echo.tools,
    top_logprobs: echo.top_logprobs,
    top_p: echo.top_p,
    truncation: "disabled",
    metadata: echo.metadata,
  };
  if (state.status === "completed" || state.status === "incomplete") response.completed_at = Math.max(ids.createdAt, ids.now());
  if (state.usage) response.usage = state.usage;
  if (echo.user !== undefined) response.user = echo.user;
  return response;
}

/** Whether a chat answer was cut at the token limit (the Responses API calls it incomplete). */
export const cutAtLimit = (finishReason: Json | undefined) => finishReason === "length";

/** A whole (not streamed) chat completion as the response object. */
export function responseOfChat(chat: JsonObject, echo: ResponsesEcho, ids: ResponseIds): JsonObject {
  const choice = Array.isArray(chat.choices) ? chat.choices.find((c) => isObject(c) && (c.index ?? 0) === 0) : undefined;
  const message = isObject(choice) && isObject(choice.message) ? choice.message : {};
  const incomplete = isObject(choice) && cutAtLimit(choice.finish_reason);
  const status: ResponseStatus = incomplete ? "incomplete" : "completed";
  const output: JsonObject[] = [];
  if (typeof message.reasoning_content === "string" && message.reasoning_content !== "") {
    output.push(reasoningItem(ids.item("rs"), status, [reasoningText(message.reasoning_content)]));
  }
  const text = typeof message.content === "string" ? message.content : "";
  const calls = Array.isArray(message.tool_calls) ? message.tool_calls.filter(isObject) : [];
  // An answer of no text and no calls is still one (empty) message, as OpenAI gives it.
  if (text !== "" || calls.length === 0) {
    output.push(messageItem(ids.item("msg"), status, [outputText(text, echo.logprobs && isObject(choice) ? logprobsOf(choice.logprobs, echo.top_logprobs ?? 0) : [])]));
  }
  for (const call of calls) {
    const fn = isObject(call.function) ? call.function : {};
    const parts: CallParts = {
      id: ids.item("fc"),
      callId: typeof call.id === "string" && call.id !== "" ? call.id : ids.item("call"),
      name: typeof fn.name === "string" ? fn.name : "",
      arguments: typeof fn.arguments === "string" ? fn.arguments : JSON.stringify(fn.arguments ?? {}),
    };
    output.push(functionCallItem(parts, "completed"));
  }
  return responseObject(echo, ids, { status, output, usage: usageOf(chat.usage) });
}
