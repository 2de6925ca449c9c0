/**
 * A streamed chat completion turned into the Responses API's events, chunk by chunk (pure, with
 * the state one stream needs). The OpenAI SDKs rebuild the response from these events and check
 * each against what came before, so the order is exact: `response.created` and
 * `response.in_progress` (a response with `output: []`), then per output item
 * `response.output_item.added`, its content part added, its deltas (`response.output_text.delta`,
 * `response.reasoning_text.delta`, `response.function_call_arguments.delta`), its `.done` events
 * and `response.output_item.done`, and last `response.completed` with the whole response: its
 * `status` says `incomplete` for an answer cut at the token limit. (OpenAI names that last event
 * `response.incomplete`, which the Python SDK's `responses.stream(...).get_final_response()`
 * raises on; every SDK reads the status from the response itself.) Every event has a
 * `sequence_number` from 0.
 * A stream that breaks ends with an `error` event and `response.failed`, and completes nothing it had open.
 * The state is bounded: an answer past `MAX_ANSWER_CHARS` or `MAX_TOOL_CALLS` ends with an error.
 */
import { isObject, type Json, type JsonObject } from "../http/json.ts";
import type { ResponsesEcho } from "./responses-request.ts";
import {
  cutAtLimit,
  functionCallItem,
  logprobsOf,
  messageItem,
  outputText,
  reasoningItem,
  reasoningText,
  responseObject,
  usageOf,
  type CallParts,
  type ResponseIds,
  type ResponseStatus,
} from "./responses-answer.ts";
import { splitSse } from "../http/sse-split.ts";

/** Characters of text, thinking and arguments one answer may hold (its last event repeats them all). */
export const MAX_ANSWER_CHARS = 4 * 1024 * 1024;
/** Tool calls one answer may make. */
export const MAX_TOOL_CALLS = 256;
/** What one logprob entry counts for against `MAX_ANSWER_CHARS` besides its token. */
const LOGPROB_CHARS = 64;
/** What one logprob entry (a token's or an alternative's) counts for against `MAX_ANSWER_CHARS`. */
const entryChars = (entry: JsonObject): number => String(entry.token).length + LOGPROB_CHARS;

interface OpenText {
  kind: "message" | "reasoning";
  outputIndex: number;
  id: string;
  text: string;
  logprobs: JsonObject[];
}

interface OpenCall extends CallParts {
  outputIndex: number;
}

export class ResponsesEvents {
  #seq = 0;
  /** The finished items by output index; a hole while one is open. */
  readonly #output: (JsonObject | undefined)[] = [];
  #text: OpenText | undefined;
  /** Calls open, by the chat API's tool call index. */
  readonly #calls = new Map<number, OpenCall>();
  #callsMade = 0;
  #finishReason: Json | undefined;
  #usage: JsonObject | undefined;
  #chars = 0;
  #ended = false;

  constructor(
    private readonly echo: ResponsesEcho,
    private readonly ids: ResponseIds,
  ) {}

  /** Whether the stream has had its last event. */
  get ended(): boolean {
    return this.#ended;
  }

  /** Whether the chat stream said how it finished (a stream that ends after that is whole, even without `[DONE]`). */
  get finished(): boolean {
    return this.#finishReason !== undefined;
  }

  #event(type: string, fields: JsonObject): JsonObject {
    return { type, sequence_number: this.#seq++, ...fields };
  }

  /** The first two events, before any chunk. */
  start(): JsonObject[] {
    const response = responseObject(this.echo, this.ids, { status: "in_progress", output: [] });
    return [this.#event("response.created", { response }), this.#event("response.in_progress", { response })];
  }

  /** The events of one chat chunk (`chat.completion.chunk`). */
  chunk(chunk: JsonObject): JsonObject[] {
    if (this.#ended) return [];
    if (isObject(chunk.usage)) this.#usage = usageOf(chunk.usage);
    const choice = Array.isArray(chunk.choices) ? chunk.choices.find((c) => isObject(c) && (c.index ?? 0) === 0) : undefined;
    if (!isObject(choice)) return [];
    const delta = isObject(choice.delta) ? choice.delta : {};
    const reasoning = typeof delta.reasoning_content === "string" ? delta.reasoning_content : "";
    const content = typeof delta.content === "string" ? delta.content : "";
    const logprobs = this.echo.logprobs ? logprobsOf(choice.logprobs, this.echo.top_logprobs ?? 0) : [];
    const calls = Array.isArray(delta.tool_calls) ? delta.tool_calls.filter(isObject) : [];
    const added = reasoning.length + content.length + logprobs.reduce((n, l) => n + entryChars(l) + (l.top_logprobs as JsonObject[]).reduce((m, t) => m + entryChars(t), 0), 0) + calls.reduce((n, c) => n + argumentsOf(c).length, 0);
    // Checked before anything of the chunk is sent: the stream ends whole up to the chunk before.
    if (this.#chars + added > MAX_ANSWER_CHARS) return this.fail(`the answer grew past ${MAX_ANSWER_CHARS} characters, more than this server relays as one response; ask for fewer tokens (max_output_tokens)`, "answer_too_large");
    const newCalls = new Set(calls.map(callIndex).filter((i) => !this.#calls.has(i))).size;
    if (this.#callsMade + newCalls > MAX_TOOL_CALLS) return this.fail(`the answer made more than ${MAX_TOOL_CALLS} tool calls, more than this server relays as one response`, "answer_too_large");
    this.#chars += added;

    const out: JsonObject[] = [];
    if (reasoning !== "") this.#textDelta("reasoning", reasoning, [], out);
    if (content !== "") this.#textDelta("message", content, logprobs, out);
    for (const call of calls) this.#callDelta(call, out);
    if (typeof choice.finish_reason === "string") this.#finishReason = choice.finish_reason;
    return out;
  }

  /** The last events once the chat stream is done: every open item completed, then the whole response. */
  done(): JsonObject[] {
    if (this.#ended) return [];
    this.#ended = true;
    const incomplete = cutAtLimit(this.#finishReason);
    const status: ResponseStatus = incomplete ? "incomplete" : "completed";
    const out: JsonObject[] = [];
    this.#closeText(status, out);
    for (const call of [...this.#calls.values()].sort((a, b) => a.outputIndex - b.outputIndex)) this.#closeCall(call, out);
    this.#calls.clear();
    // An answer of no text and no calls is still one (empty) message, as OpenAI gives it.
    if (this.#output.length === 0) {
      this.#openText("message", out);
      this.#closeText(status, out);
    }
    const response = responseObject(this.echo, this.ids, { status, output: this.#output.filter(isObject), usage: this.#usage });
    out.push(this.#event("response.completed", { response }));
    return out;
  }

  /**
   * The stream's end when it broke, nothing completed that was open: an `error` event, which
   * carries its error as an object too (the OpenAI SDKs raise an APIError at once on one that
   * does: Python's only then), and `response.failed` with the response as far as it got, which
   * is how OpenAI ends a failed response, for clients that read on.
   */
  fail(message: string, code: string): JsonObject[] {
    if (this.#ended) return [];
    this.#ended = true;
    const error = { code, message };
    const response = responseObject(this.echo, this.ids, { status: "failed", output: this.#output.filter(isObject), usage: this.#usage, error });
    return [this.#event("error", { code, message, param: null, error: { type: "server_error", ...error } }), this.#event("response.failed", { response })];
  }

  #textDelta(kind: OpenText["kind"], delta: string, logprobs: JsonObject[], out: JsonObject[]): void {
    if (this.#text && this.#text.kind !== kind) this.#closeText("completed", out);
    const open = this.#text ?? this.#openText(kind, out);
    open.text += delta;
    const at = { item_id: open.id, output_index: open.outputIndex, content_index: 0 };
    if (kind === "message") {
      open.logprobs.push(...logprobs);
      out.push(this.#event("response.output_text.delta", { ...at, delta, logprobs }));
    } else {
      out.push(this.#event("response.reasoning_text.delta", { ...at, delta }));
    }
  }

  #openText(kind: OpenText["kind"], out: JsonObject[]): OpenText {
    const open: OpenText = { kind, outputIndex: this.#output.length, id: this.ids.item(kind === "message" ? "msg" : "rs"), text: "", logprobs: [] };
    this.#output.push(undefined);
    this.#text = open;
    const item = kind === "message" ? messageItem(open.id, "in_progress", []) : reasoningItem(open.id, "in_progress", []);
    const part = kind === "message" ? outputText("", []) : reasoningText("");
    out.push(this.#event("response.output_item.added", { output_index: open.outputIndex, item }));
    out.push(this.#event("response.content_part.added", { item_id: open.id, output_index: open.outputIndex, content_index: 0, part }));
    return open;
  }

  #closeText(status: ResponseStatus, out: JsonObject[]): void {
    const open = this.#text;
    if (!open) return;
    this.#text = undefined;
    const at = { item_id: open.id, output_index: open.outputIndex, content_index: 0 };
    let part: JsonObject;
    let item: JsonObject;
    if (open.kind === "message") {
      part = outputText(open.text, open.logprobs);
      item = messageItem(open.id, status, [part]);
      out.push(this.#event("response.output_text.done", { ...at, text: open.text, logprobs: open.logprobs }));
    } else {
      part = reasoningText(open.text);
      item = reasoningItem(open.id, status, [part]);
      out.push(this.#event("response.reasoning_text.done", { ...at, text: open.text }));
    }
    out.push(this.#event("response.content_part.done", { ...at, part }));
    out.push(this.#event("response.output_item.done", { output_index: open.outputIndex, item }));
    this.#output[open.outputIndex] = item;
  }

  #callDelta(delta: JsonObject, out: JsonObject[]): void {
    const index = callIndex(delta);
    const fn = isObject(delta.function) ? delta.function : {};
    let call = this.#calls.get(index);
    if (!call) {
      // The model moved on from its text to a call: the text is whole.
      this.#closeText("completed", out);
      call = {
        outputIndex: this.#output.length,
        id: this.ids.item("fc"),
        callId: typeof delta.id === "string" && delta.id !== "" ? delta.id : this.ids.item("call"),
        name: typeof fn.name === "string" ? fn.name : "",
        arguments: "",
      };
      this.#output.push(undefined);
      this.#calls.set(index, call);
      this.#callsMade++;
      out.push(this.#event("response.output_item.added", { output_index: call.outputIndex, item: functionCallItem(call, "in_progress") }));
    } else if (call.name === "" && typeof fn.name === "string") {
      call.name = fn.name;
    }
    const args = argumentsOf(delta);
    if (args === "") return;
    call.arguments += args;
    out.push(this.#event("response.function_call_arguments.delta", { item_id: call.id, output_index: call.outputIndex, delta: args }));
  }

  #closeCall(call: OpenCall, out: JsonObject[]): void {
    const at = { item_id: call.id, output_index: call.outputIndex };
    out.push(this.#event("response.function_call_arguments.done", { ...at, name: call.name, arguments: call.arguments }));
    const item = functionCallItem(call, "completed");
    out.push(this.#event("response.output_item.done", { output_index: call.outputIndex, item }));
    this.#output[call.outputIndex] = item;
  }
}

const callIndex = (delta: JsonObject) => (typeof delta.index === "number" && Number.isInteger(delta.index) ? delta.index : 0);

function argumentsOf(delta: JsonObject): string {
  const fn = isObject(delta.function) ? delta.function : undefined;
  return fn && typeof fn.arguments === "string" ? fn.arguments : "";
}

/** One event as SSE text, named by its type as OpenAI names them. */
export const sseOf = (event: JsonObject): string => `event: ${String(event.type)}\ndata: ${JSON.stringify(event)}\n\n`;

/** One event of the chat stream: its data, or a comment (a keep-alive). */
export type ChatSseEvent = { data: string } | { comment: true };

/** Characters one event of the chat stream may hold before the stream is taken as broken. */
export const MAX_CHAT_EVENT_CHARS = 16 * 1024 * 1024;

/**
 * The whole events in `held + text` (the chat stream's next piece, decoded) that carry data or a
 * comment, and what is left of one still arriving (pure). Undefined when that rest is past
 * `MAX_CHAT_EVENT_CHARS`.
 */
export function readChatSse(held: string, text: string): { events: ChatSseEvent[]; held: string } | undefined {
  const split = splitSse(held, text, MAX_CHAT_EVENT_CHARS);
  if (split.held === undefined) return undefined;
  const events: ChatSseEvent[] = [];
  for (const e of split.events) {
    if (e.data !== undefined) events.push({ data: e.data });
    else if (e.comment) events.push({ comment: true });
  }
  return { events, held: split.held };
}
