/**
 * A request that forces a tool call (OpenAI's `tool_choice: "required"` or a named function,
 * Anthropic's `{type: "any"}` or `{type: "tool"}`, the Responses API's alike) sent to a model whose
 * chat template has no tool calling (pure): llama-server would answer it in plain text, silently,
 * and the client would take that for the model declining its contract. The node that serves the
 * model knows its template (`pool/template-caps.ts`) and refuses it instead, whichever node the
 * client called.
 */
import type { TemplateCaps } from "../../pool/template-caps.ts";
import { isObject } from "../http/json.ts";

/** The public paths whose requests may carry tools: chat completions, Responses, Anthropic messages. */
export const TOOL_PATHS: readonly string[] = ["/v1/chat/completions", "/v1/responses", "/v1/messages"];

/** `tool_choice` object types that name the tool to call, in any of the three dialects. */
const NAMED = new Set(["function", "tool", "custom"]);

/** How the request forces a tool call, in its own words (for the refusal); undefined when it does not. */
export function forcedToolChoice(body: unknown): string | undefined {
  if (!isObject(body)) return undefined;
  const choice = body.tool_choice;
  if (choice === "required") return 'tool_choice "required"';
  if (isObject(choice)) {
    const type = choice.type;
    const allowed = isObject(choice.allowed_tools) ? choice.allowed_tools : choice;
    const forced = type === "required" || type === "any" || (typeof type === "string" && NAMED.has(type)) || (type === "allowed_tools" && allowed.mode === "required");
    if (forced) return `tool_choice ${JSON.stringify(choice).slice(0, 200)}`;
  }
  // The chat API's older words for a named function.
  const legacy = body.function_call;
  if (isObject(legacy) && typeof legacy.name === "string") return `function_call ${JSON.stringify(legacy).slice(0, 200)}`;
  return undefined;
}

/** The refusal of a request to `path` for `model` served with `caps`, or undefined when it may go on (caps unknown: it goes on). */
export function toolChoiceRefusal(path: string, model: string, body: unknown, caps: TemplateCaps | undefined): string | undefined {
  if (!TOOL_PATHS.includes(path) || caps === undefined || caps.toolCalls) return undefined;
  const forced = forcedToolChoice(body);
  if (forced === undefined) return undefined;
  return `${forced} cannot be honoured: model "${model}"'s chat template has no tool calling; leave tool_choice at auto to get a text answer, or use a model whose chat template calls tools`;
}
