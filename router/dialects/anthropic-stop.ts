/**
 * Anthropic's stop reason for a reply that stopped on one of the request's `stop_sequences`
 * (pure): llama-server names the sequence (`stop_sequence`) but calls the stop `end_turn`, and the
 * SDKs and agents that branch on `stop_reason === "stop_sequence"` then take a finished turn for
 * it. The reason is put right in the whole message and in a stream's `message_delta`.
 */
import { rewriteAnswer } from "./answer-rewrite.ts";
import type { Translator } from "./translation.ts";
import { isObject, type Json, type JsonObject } from "../http/json.ts";

/** `stop` (a message, or a `message_delta`'s delta) with the reason it stopped put right; the same object when nothing changes. */
export function withStopReason(stop: JsonObject, sequences: readonly string[]): JsonObject {
  const sequence = stop.stop_sequence;
  // Only a stop llama-server calls a finished turn: a tool call or the token limit keeps its reason.
  if (stop.stop_reason !== "end_turn" || typeof sequence !== "string" || !sequences.includes(sequence)) return stop;
  return { ...stop, stop_reason: "stop_sequence" };
}

/** A whole message answer put right. */
export function stopReasonOfMessage(answer: Json, sequences: readonly string[]): Json {
  if (!isObject(answer) || answer.type !== "message") return answer;
  return withStopReason(answer, sequences);
}

/** A stream event put right: the `message_delta` that carries the stop; undefined for any other event, or when nothing changes. */
export function stopReasonOfEvent(event: string, data: JsonObject, sequences: readonly string[]): JsonObject | undefined {
  if ((event !== "message_delta" && data.type !== "message_delta") || !isObject(data.delta)) return undefined;
  const delta = withStopReason(data.delta, sequences);
  return delta === data.delta ? undefined : { ...data, delta };
}

/** The request's stop sequences (the strings among them). */
function stopSequences(body: JsonObject): string[] {
  return Array.isArray(body.stop_sequences) ? body.stop_sequences.filter((s): s is string => typeof s === "string" && s !== "") : [];
}

/** `/v1/messages`: passed on as it is, its answer's stop reason put right when it asked for stop sequences. */
export const messagesTranslator: Translator = (body) => {
  const sequences = stopSequences(body);
  if (sequences.length === 0) return undefined;
  return {
    path: "/v1/messages",
    body,
    answer: (res) =>
      rewriteAnswer(res, {
        whole: (json) => stopReasonOfMessage(json, sequences),
        stream: () => (event, data) => stopReasonOfEvent(event, data, sequences),
      }),
  };
};
