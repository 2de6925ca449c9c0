/**
 * A tool choice in words llama-server honours (pure). It takes the chat API's `tool_choice` as a
 * string only (auto, none, required): an object naming a function is quietly taken as auto (a
 * warning in its log), so the model may answer in text or call another tool. Its Anthropic endpoint
 * turns `{type: "tool", name}` into required without narrowing the tools, and leaves
 * `{type: "none"}` at auto. So the node that serves the model sends a named choice as that tool
 * alone, required, and Anthropic's none as no tools at all: the same contract, in words its
 * llama-server keeps.
 */
import { isObject, type Json, type JsonObject } from "../http/json.ts";

const show = (v: unknown) => JSON.stringify(v)?.slice(0, 200) ?? String(v);

/** The names of the functions an allowed_tools choice lists, in either API's shape. */
function allowedNames(tools: Json[]): string[] {
  return tools.filter(isObject).map((t) => (isObject(t.function) ? t.function.name : t.name)).filter((n): n is string => typeof n === "string");
}

/** The chat API's tools that are among `names`. */
const chatToolsNamed = (tools: Json[], names: readonly string[]) => tools.filter((t) => isObject(t) && isObject(t.function) && names.includes(t.function.name as string));

/**
 * A chat completions body whose `tool_choice` names tools, narrowed to them with a string choice;
 * undefined when there is nothing to narrow; the refusal (a string) when it names a tool the request lacks.
 */
export function narrowChatToolChoice(body: JsonObject): JsonObject | string | undefined {
  const choice = body.tool_choice;
  if (!isObject(choice)) return undefined;
  const tools = Array.isArray(body.tools) ? body.tools : [];
  let names: string[];
  let mode: "required" | "auto";
  if (choice.type === "function" && isObject(choice.function) && typeof choice.function.name === "string") {
    names = [choice.function.name];
    mode = "required";
  } else if (choice.type === "allowed_tools" && isObject(choice.allowed_tools) && Array.isArray(choice.allowed_tools.tools)) {
    names = allowedNames(choice.allowed_tools.tools);
    mode = choice.allowed_tools.mode === "required" ? "required" : "auto";
  } else {
    return undefined;
  }
  const narrowed = chatToolsNamed(tools, names);
  if (narrowed.length === 0) return `tool_choice ${show(choice)} names no function among "tools"`;
  return { ...body, tools: narrowed, tool_choice: mode };
}

/** An Anthropic messages body whose `tool_choice` names a tool or none, in the words llama-server keeps; undefined when there is nothing to change. */
export function narrowMessagesToolChoice(body: JsonObject): JsonObject | string | undefined {
  const choice = body.tool_choice;
  if (!isObject(choice)) return undefined;
  if (choice.type === "none") {
    const { tools: _tools, tool_choice: _choice, ...rest } = body;
    return rest;
  }
  if (choice.type !== "tool" || typeof choice.name !== "string") return undefined;
  const tools = (Array.isArray(body.tools) ? body.tools : []).filter((t) => isObject(t) && t.name === choice.name);
  if (tools.length === 0) return `tool_choice names the tool ${show(choice.name)}, which is not among "tools"`;
  const { name: _name, ...kept } = choice;
  return { ...body, tools, tool_choice: { ...kept, type: "any" } };
}

/**
 * The body llama-server is sent for a request to public `path`, when its tool choice needs other
 * words there; undefined when it goes as it came; the refusal of a choice that names a tool the
 * request lacks. The node that serves the model does this, after it checked the choice in the
 * client's own words (`router/serving/tool-choice.ts`): it knows the llama-server it speaks to.
 */
export function toolChoiceForServer(path: string, body: JsonObject): JsonObject | string | undefined {
  if (path === "/v1/chat/completions") return narrowChatToolChoice(body);
  if (path === "/v1/messages") return narrowMessagesToolChoice(body);
  return undefined;
}
