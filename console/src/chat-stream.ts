/**
 * The chat playground's pure parts: what one chunk of an OpenAI chat stream adds (text, the
 * reasoning text some models send apart, llama-server's `timings` on its last chunk, `usage`, an
 * error), and the transcript, which keeps the newest `CHAT_MAX_MESSAGES` only.
 */
import { keepLast } from "./store.ts";

export const CHAT_MAX_MESSAGES = 100;

export interface ChatMessage {
  role: "user" | "assistant";
  content: string;
}

/** llama-server's timings of one answer. */
export interface Timings {
  prompt_n?: number;
  prompt_ms?: number;
  predicted_n?: number;
  predicted_ms?: number;
  predicted_per_second?: number;
}

export interface ChunkParts {
  done: boolean;
  content: string;
  reasoning: string;
  timings: Timings | null;
  usage: { prompt_tokens?: number; completion_tokens?: number } | null;
  error: string | null;
}

const NOTHING: ChunkParts = { done: false, content: "", reasoning: "", timings: null, usage: null, error: null };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** What one `data:` of the stream carries; `[DONE]` ends it, text that is not JSON adds nothing. */
export function parseChunk(data: string): ChunkParts {
  if (data.trim() === "[DONE]") return { ...NOTHING, done: true };
  let v: unknown;
  try {
    v = JSON.parse(data);
  } catch {
    return NOTHING;
  }
  if (!isObject(v)) return NOTHING;
  const out: ChunkParts = { ...NOTHING };
  if (isObject(v.error)) out.error = typeof v.error.message === "string" ? v.error.message : "The model answered with an error.";
  else if (typeof v.error === "string") out.error = v.error;
  const choice = Array.isArray(v.choices) ? v.choices[0] : undefined;
  if (isObject(choice) && isObject(choice.delta)) {
    if (typeof choice.delta.content === "string") out.content = choice.delta.content;
    if (typeof choice.delta.reasoning_content === "string") out.reasoning = choice.delta.reasoning_content;
  }
  if (isObject(v.timings)) out.timings = v.timings as Timings;
  if (isObject(v.usage)) out.usage = v.usage as ChunkParts["usage"];
  return out;
}

export const appendMessage = (messages: readonly ChatMessage[], m: ChatMessage): ChatMessage[] =>
  keepLast([...messages, m], CHAT_MAX_MESSAGES);
