/**
 * Ollama's API in OpenAI's words and back (pure): model names (`x:latest` is our `x`), request
 * options to llama-server's sampling parameters, `/api/chat` and `/api/generate` bodies to
 * `/v1/chat/completions` or `/v1/completions` bodies, and OpenAI answers (whole or one SSE event at
 * a time) to Ollama's JSON and NDJSON lines with their final statistics. The routes
 * (`router/dialects/ollama.ts`) only move bytes through these functions.
 */
import { isObject, type Json, type JsonObject } from "../http/json.ts";
import { splitSse, type WholeSseEvent } from "../http/sse-split.ts";

export type { Json, JsonObject } from "../http/json.ts";

/** Our model names carry no tag: `x:latest` and `x` are the same model; other tags are part of the name. */
export function modelName(ollamaName: string): string {
  return ollamaName.endsWith(":latest") ? ollamaName.slice(0, -":latest".length) : ollamaName;
}

/** The name Ollama clients expect in lists: always tagged. */
export function taggedName(name: string): string {
  return name.includes(":") ? name : `${name}:latest`;
}

/** Ollama `options` with the same meaning under llama-server's name (its /v1 routes take its native ones too). */
const OPTION_NAMES: Record<string, string> = {
  temperature: "temperature",
  top_p: "top_p",
  top_k: "top_k",
  min_p: "min_p",
  typical_p: "typical_p",
  seed: "seed",
  num_predict: "max_tokens",
  stop: "stop",
  repeat_penalty: "repeat_penalty",
  repeat_last_n: "repeat_last_n",
  presence_penalty: "presence_penalty",
  frequency_penalty: "frequency_penalty",
  mirostat: "mirostat",
  mirostat_tau: "mirostat_tau",
  mirostat_eta: "mirostat_eta",
  num_keep: "n_keep",
};

/**
 * Options that set how the model is loaded (`num_ctx`, `num_gpu`, `num_thread`, ...), not how one
 * answer is sampled: the pool loads a model once for every caller, with the context from
 * `--ctx-size` or models.json, so a request cannot change them; they are ignored, not refused,
 * because Ollama clients send them routinely.
 */
export const LOAD_OPTIONS: readonly string[] = ["num_ctx", "num_batch", "num_gpu", "main_gpu", "num_thread", "use_mmap", "use_mlock", "numa", "low_vram", "f16_kv", "vocab_only", "logits_all", "embedding_only"];

/** llama-server sampling parameters from Ollama `options`; unknown and load-time options are dropped. */
export function mapOptions(options: unknown): JsonObject {
  const out: JsonObject = {};
  if (!isObject(options)) return out;
  for (const [key, value] of Object.entries(options)) {
    const name = OPTION_NAMES[key];
    if (name === undefined || value === null) continue;
    // Ollama's num_predict -1 means "no limit"; OpenAI's max_tokens has no such value.
    if (key === "num_predict" && typeof value === "number" && value < 0) continue;
    out[name] = value;
  }
  return out;
}

/** `format` ("json" or a JSON schema) as llama-server's `response_format`. */
export function mapFormat(format: unknown): JsonObject | undefined {
  if (format === "json") return { type: "json_object" };
  if (isObject(format)) return { type: "json_schema", json_schema: { name: "format", schema: format } };
  return undefined;
}

export type Mapped = { ok: true; path: string; body: JsonObject; model: string; stream: boolean } | { ok: false; error: string };

const bad = (error: string): Mapped => ({ ok: false, error });

/** Base64 images (Ollama) as OpenAI content parts beside the text. */
function content(text: string, images: unknown): Json {
  if (!Array.isArray(images) || images.length === 0) return text;
  const parts: Json[] = [{ type: "text", text }];
  for (const img of images) {
    if (typeof img === "string") parts.push({ type: "image_url", image_url: { url: img.startsWith("data:") ? img : `data:image/png;base64,${img}` } });
  }
  return parts;
}

/**
 * Ollama messages as OpenAI's. A tool call needs an id in OpenAI's words, and its result the id it
 * answers (`tool_call_id`, which llama-server's templates render by): a call keeps the id it came
 * with, else gets `call_<n>` (n counting every call of the conversation); a tool message keeps its
 * `tool_call_id`, else answers the first unanswered call of the assistant message before it with its
 * `tool_name`, else the first unanswered one (LangChain's ChatOllama sends neither).
 */
function mapMessages(list: readonly unknown[]): Json[] | string {
  const out: Json[] = [];
  let numbered = 0;
  let open: { id: string; name: string }[] = [];
  for (const m of list) {
    if (!isObject(m) || typeof m.role !== "string") return 'each message needs a "role"';
    const message: JsonObject = { role: m.role, content: content(typeof m.content === "string" ? m.content : "", m.images) };
    if (Array.isArray(m.tool_calls)) {
      open = [];
      message.tool_calls = m.tool_calls.map((call, i) => {
        const fn = isObject(call) && isObject(call.function) ? call.function : {};
        const id = isObject(call) && typeof call.id === "string" && call.id !== "" ? call.id : `call_${numbered + i}`;
        const name = typeof fn.name === "string" ? fn.name : "";
        open.push({ id, name });
        return { id, type: "function", function: { name, arguments: typeof fn.arguments === "string" ? fn.arguments : JSON.stringify(fn.arguments ?? {}) } };
      });
      numbered += m.tool_calls.length;
    }
    if (m.role === "tool") {
      const given = typeof m.tool_call_id === "string" && m.tool_call_id !== "" ? m.tool_call_id : undefined;
      const answered = given !== undefined ? open.find((c) => c.id === given) : (open.find((c) => c.name === m.tool_name) ?? open[0]);
      open = open.filter((c) => c !== answered);
      if (given !== undefined || answered) message.tool_call_id = given ?? answered!.id;
    }
    if (typeof m.tool_name === "string") message.name = m.tool_name;
    out.push(message);
  }
  return out;
}

/** Fields every inference body shares: model, stream with usage, sampling, format. */
function common(req: JsonObject, model: string, stream: boolean): JsonObject {
  const body: JsonObject = { model, stream, ...mapOptions(req.options) };
  if (stream) body.stream_options = { include_usage: true };
  const format = mapFormat(req.format);
  if (format) body.response_format = format;
  return body;
}

function modelOf(req: JsonObject): string | undefined {
  const m = req.model ?? req.name;
  return typeof m === "string" && m !== "" ? modelName(m) : undefined;
}

/** `/api/chat` → `/v1/chat/completions`. Ollama streams unless told `stream: false`. */
export function mapChat(req: unknown): Mapped {
  if (!isObject(req)) return bad("request body must be a JSON object");
  const model = modelOf(req);
  if (!model) return bad('"model" is required');
  const messages = mapMessages(Array.isArray(req.messages) ? req.messages : []);
  if (typeof messages === "string") return bad(messages);
  const stream = req.stream !== false;
  const body = common(req, model, stream);
  body.messages = messages;
  if (Array.isArray(req.tools) && req.tools.length > 0) body.tools = req.tools;
  return { ok: true, path: "/chat/completions", body, model, stream };
}

/**
 * `/api/generate` → `/v1/chat/completions` (the model's chat template applies, as in Ollama), or
 * `/v1/completions` with the prompt as it is when `raw` is set.
 */
export function mapGenerate(req: unknown): Mapped {
  if (!isObject(req)) return bad("request body must be a JSON object");
  const model = modelOf(req);
  if (!model) return bad('"model" is required');
  if (req.prompt !== undefined && typeof req.prompt !== "string") return bad('"prompt" must be a string');
  const prompt = typeof req.prompt === "string" ? req.prompt : "";
  const stream = req.stream !== false;
  const body = common(req, model, stream);
  if (req.raw === true) {
    body.prompt = prompt;
    return { ok: true, path: "/completions", body, model, stream };
  }
  const messages: Json[] = [];
  if (typeof req.system === "string" && req.system !== "") messages.push({ role: "system", content: req.system });
  messages.push({ role: "user", content: content(prompt, req.images) });
  body.messages = messages;
  return { ok: true, path: "/chat/completions", body, model, stream };
}

/** `/api/embed` (input: string or strings) and the legacy `/api/embeddings` (prompt) → `/v1/embeddings`. */
export function mapEmbed(req: unknown, legacy: boolean): Mapped {
  if (!isObject(req)) return bad("request body must be a JSON object");
  const model = modelOf(req);
  if (!model) return bad('"model" is required');
  const input = legacy ? req.prompt : req.input;
  const ok = typeof input === "string" || (Array.isArray(input) && input.every((s) => typeof s === "string"));
  if (!ok) return bad(legacy ? '"prompt" must be a string' : '"input" must be a string or an array of strings');
  return { ok: true, path: "/embeddings", body: { model, input }, model, stream: false };
}

/** Ollama durations are nanoseconds. */
const ns = (ms: number) => Math.round(ms * 1e6);

export interface AnswerStats {
  done_reason: string;
  total_duration: number;
  load_duration: number;
  prompt_eval_count: number;
  prompt_eval_duration: number;
  eval_count: number;
  eval_duration: number;
}

/** The final line's figures from llama-server's `timings` (or `usage` when there are none). */
export function finalStats(answer: JsonObject, finishReason: string | undefined, totalMs: number): AnswerStats {
  const t = isObject(answer.timings) ? answer.timings : {};
  const u = isObject(answer.usage) ? answer.usage : {};
  const n = (v: Json | undefined) => (typeof v === "number" ? v : 0);
  return {
    done_reason: finishReason === "tool_calls" ? "stop" : (finishReason ?? "stop"),
    total_duration: ns(totalMs),
    // Ours to know only for local loads, and a load is not part of a request's answer here: 0.
    load_duration: 0,
    prompt_eval_count: n(t.prompt_n) || n(u.prompt_tokens),
    prompt_eval_duration: ns(n(t.prompt_ms)),
    eval_count: n(t.predicted_n) || n(u.completion_tokens),
    eval_duration: ns(n(t.predicted_ms)),
  };
}

export type AnswerKind = "chat" | "generate";

/** Tool calls as Ollama gives them: the `id` if any, `function.index` (0 left out, as Ollama's) and arguments an object. */
export function mapToolCalls(calls: unknown): Json[] {
  if (!Array.isArray(calls)) return [];
  return calls.map((c, i) => {
    const fn = isObject(c) && isObject(c.function) ? c.function : {};
    let args: Json = {};
    if (typeof fn.arguments === "string") {
      try {
        args = JSON.parse(fn.arguments) as Json;
      } catch {
        args = fn.arguments;
      }
    } else if (isObject(fn.arguments)) args = fn.arguments;
    const id = isObject(c) && typeof c.id === "string" && c.id !== "" ? c.id : undefined;
    return { ...(id !== undefined ? { id } : {}), function: { ...(i > 0 ? { index: i } : {}), name: typeof fn.name === "string" ? fn.name : "", arguments: args } };
  });
}

/** One line's text: a chat message, or generate's `response`. */
function piece(kind: AnswerKind, text: string, toolCalls: Json[] | undefined, thinking = ""): JsonObject {
  // Ollama puts a thinking model's reasoning beside the answer: `thinking` (generate) or `message.thinking` (chat).
  if (kind === "generate") return { response: text, ...(thinking ? { thinking } : {}) };
  const message: JsonObject = { role: "assistant", content: text };
  if (thinking) message.thinking = thinking;
  if (toolCalls && toolCalls.length) message.tool_calls = toolCalls;
  return { message };
}

/** A whole OpenAI answer (chat.completion or text_completion) as Ollama's whole answer. */
export function wholeAnswer(kind: AnswerKind, model: string, answer: unknown, totalMs: number, now: Date): JsonObject {
  const a = isObject(answer) ? answer : {};
  const choice = Array.isArray(a.choices) && isObject(a.choices[0]) ? a.choices[0] : {};
  const message = isObject(choice.message) ? choice.message : {};
  const text = typeof choice.text === "string" ? choice.text : typeof message.content === "string" ? message.content : "";
  const finish = typeof choice.finish_reason === "string" ? choice.finish_reason : undefined;
  const thinking = typeof message.reasoning_content === "string" ? message.reasoning_content : "";
  return {
    model: taggedName(model),
    created_at: now.toISOString(),
    ...piece(kind, text, mapToolCalls(message.tool_calls), thinking),
    done: true,
    ...finalStats(a, finish, totalMs),
  };
}

/** The longest SSE event the translator holds while waiting for its end (a generous bound on one token's event). */
export const MAX_EVENT_CHARS = 1 << 20;
/** Tool calls one streamed answer may make (a model calls a few); the answer may come from another node. */
const MAX_TOOL_CALLS = 128;

/**
 * Turns an OpenAI SSE stream into Ollama NDJSON, one event at a time: text deltas become lines as
 * they come; tool call fragments are gathered and given whole in a line of their own when the answer
 * finishes (as Ollama's), before the final line with `done: true` and the last statistics given.
 */
export class StreamTranslator {
  private finish: string | undefined;
  private stats: JsonObject = {};
  private readonly calls: { id: string; name: string; args: string }[] = [];
  /** The text of the event still arriving. */
  private held = "";
  /** An event grew past MAX_EVENT_CHARS: the stream is given up. */
  private failed = false;
  ended = false;

  constructor(
    private readonly kind: AnswerKind,
    private readonly model: string,
  ) {}

  /** NDJSON lines for the SSE bytes so far (decoded text); events split across chunks wait for their end. */
  push(text: string, now: Date): string[] {
    if (this.failed) return [];
    // The stream may come from another node: an event that never ends must not grow without bound.
    const split = splitSse(this.held, text, MAX_EVENT_CHARS);
    const out: string[] = [];
    for (const event of split.events) {
      const line = this.event(event, now);
      if (line) out.push(line);
    }
    if (split.held === undefined) {
      this.failed = true;
      this.held = "";
      out.push(ndjson({ error: `an event of the stream for model "${this.model}" is over ${MAX_EVENT_CHARS} characters` }));
    } else this.held = split.held;
    return out;
  }

  /** The closing line with `done: true`; an error line when the stream never said `[DONE]`. */
  close(now: Date, totalMs: number): string {
    if (this.failed) return "";
    if (!this.ended) return ndjson({ error: `the stream for model "${this.model}" ended early` });
    // Calls the stream gave no finish_reason after: their line now, before the last.
    const calls = this.takeCalls();
    return (calls ? this.line(now, "", "", calls) : "") + ndjson({
      model: taggedName(this.model),
      created_at: now.toISOString(),
      ...piece(this.kind, "", undefined),
      done: true,
      ...finalStats(this.stats, this.finish, totalMs),
    });
  }

  /** The tool calls gathered so far, in Ollama's shape, taken (undefined: none). */
  private takeCalls(): Json[] | undefined {
    const calls = this.calls.splice(0).filter((c) => c !== undefined);
    return calls.length ? mapToolCalls(calls.map((c) => ({ id: c.id, function: { name: c.name, arguments: c.args } }))) : undefined;
  }

  private event(event: WholeSseEvent, now: Date): string | undefined {
    // Nothing after `[DONE]` belongs to the answer.
    if (this.ended) return undefined;
    const data = event.data?.trim() ?? "";
    // A keep-alive comment: an empty line in its place, so a quiet stream still moves bytes (for
    // proxies between us and the client) and the client sees the model is still at work.
    if (data === "") return event.comment ? this.line(now, "") : undefined;
    if (data === "[DONE]") {
      this.ended = true;
      return undefined;
    }
    let json: unknown;
    try {
      json = JSON.parse(data);
    } catch {
      return undefined;
    }
    if (!isObject(json)) return undefined;
    if (json.error !== undefined) {
      const e = json.error;
      return ndjson({ error: isObject(e) && typeof e.message === "string" ? e.message : String(e) });
    }
    if (json.timings !== undefined || json.usage !== undefined) this.stats = { ...this.stats, ...(json.timings !== undefined ? { timings: json.timings } : {}), ...(json.usage !== undefined && json.usage !== null ? { usage: json.usage } : {}) };
    const choice = Array.isArray(json.choices) && isObject(json.choices[0]) ? json.choices[0] : undefined;
    if (!choice) return undefined;
    if (typeof choice.finish_reason === "string") this.finish = choice.finish_reason;
    const delta = isObject(choice.delta) ? choice.delta : {};
    for (const call of Array.isArray(delta.tool_calls) ? delta.tool_calls : []) {
      if (!isObject(call)) continue;
      const index = typeof call.index === "number" ? call.index : this.calls.length;
      if (!Number.isInteger(index) || index < 0 || index >= MAX_TOOL_CALLS) continue;
      const fn = isObject(call.function) ? call.function : {};
      const slot = (this.calls[index] ??= { id: "", name: "", args: "" });
      if (typeof call.id === "string" && slot.id === "") slot.id = call.id;
      if (typeof fn.name === "string") slot.name += fn.name;
      if (typeof fn.arguments === "string") slot.args += fn.arguments;
    }
    const text = typeof choice.text === "string" ? choice.text : typeof delta.content === "string" ? delta.content : "";
    const thinking = typeof delta.reasoning_content === "string" ? delta.reasoning_content : "";
    // The answer is finished: its calls are whole now.
    const calls = typeof choice.finish_reason === "string" ? this.takeCalls() : undefined;
    if (text === "" && thinking === "" && !calls) return undefined;
    return this.line(now, text, thinking, calls);
  }

  private line(now: Date, text: string, thinking = "", toolCalls?: Json[]): string {
    return ndjson({ model: taggedName(this.model), created_at: now.toISOString(), ...piece(this.kind, text, toolCalls, thinking), done: false });
  }
}

export const ndjson = (line: JsonObject): string => `${JSON.stringify(line)}\n`;

/**
 * `keep_alive` in milliseconds: a number is seconds, a string a Go duration ("5m", "1h30m", "0");
 * negative means "keep loaded". Undefined when absent or unreadable.
 */
export function keepAliveMs(value: unknown): number | undefined {
  if (typeof value === "number" && Number.isFinite(value)) return value * 1000;
  if (typeof value !== "string" || value.trim() === "") return undefined;
  const s = value.trim();
  if (/^-?\d+(\.\d+)?$/.test(s)) return Number(s) * 1000;
  const m = /^(-)?((?:\d+(?:\.\d+)?(?:ms|h|m|s))+)$/.exec(s);
  if (!m) return undefined;
  const unit: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  let total = 0;
  for (const part of m[2]!.matchAll(/(\d+(?:\.\d+)?)(ms|h|m|s)/g)) total += Number(part[1]) * unit[part[2]!]!;
  return m[1] ? -total : total;
}

/** An OpenAI error body as Ollama's `{"error": "..."}` string. */
export function ollamaError(body: unknown, fallback: string): JsonObject {
  if (isObject(body) && isObject(body.error) && typeof body.error.message === "string") return { error: body.error.message };
  if (isObject(body) && typeof body.error === "string") return { error: body.error };
  return { error: fallback };
}
