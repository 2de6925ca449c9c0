/**
 * A Responses API request (`/v1/responses`) as the chat completion llama-server answers (pure).
 * The mesh keeps no state between requests, so a request must carry its whole conversation:
 * `instructions` become the first system message, `input` items become chat messages (easy
 * messages `{role, content}` and `type: "message"` items alike, `function_call` items the
 * assistant's `tool_calls`, `function_call_output` items `tool` messages), function tools become
 * chat tools and `text.format` becomes `response_format`, so a JSON schema reaches the model as
 * a grammar. What the answer must repeat to the client (its model name, its settings) comes back
 * beside the chat body as `ResponsesEcho`. What cannot be served here is refused with what to do.
 */
import { isObject, type Json, type JsonObject } from "../http/json.ts";

/** The request's settings as the response object repeats them to the client. */
export interface ResponsesEcho {
  model: string;
  instructions: string | null;
  max_output_tokens: number | null;
  temperature: number | null;
  top_p: number | null;
  top_logprobs: number | null;
  tools: Json[];
  tool_choice: Json;
  parallel_tool_calls: boolean;
  text: JsonObject;
  reasoning: JsonObject;
  metadata: JsonObject;
  user: string | undefined;
  /** Whether the client asked for the logprobs of the output text. */
  logprobs: boolean;
}

type Refusal = { error: string };
const refuse = (error: string): Refusal => ({ error });
const isRefusal = (v: unknown): v is Refusal => isObject(v) && typeof v.error === "string" && Object.keys(v).length === 1;

/** The most top tokens a request may ask for (OpenAI's limit). */
export const MAX_TOP_LOGPROBS = 20;

const INCLUDE_LOGPROBS = "message.output_text.logprobs";

/**
 * llama-server's own sampling fields, passed on as they came: a client that reaches past the
 * Responses API (`extra_body`) gets what it would get from the chat route.
 */
const LLAMA_EXTRAS = ["stop", "seed", "top_k", "min_p", "typical_p", "presence_penalty", "frequency_penalty", "repeat_penalty", "repeat_last_n", "logit_bias", "chat_template_kwargs"];

const show = (v: unknown) => JSON.stringify(v)?.slice(0, 200) ?? String(v);

/** Chat content from Responses content parts: one text as a string, else chat parts. */
function contentOf(content: Json | undefined, role: string, where: string): Json | Refusal {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return refuse(`${where}.content must be a string or a list of content parts (input_text, input_image, output_text); got ${show(content)}`);
  const parts: Json[] = [];
  for (const [i, part] of content.entries()) {
    const mapped = partOf(part, role, `${where}.content[${i}]`);
    if (isRefusal(mapped)) return mapped;
    parts.push(mapped);
  }
  if (parts.length === 0) return "";
  const only = parts.length === 1 ? parts[0] : undefined;
  if (isObject(only) && only.type === "text") return only.text ?? "";
  return parts;
}

/** One content part in the chat API's words. */
function partOf(part: Json, role: string, where: string): JsonObject | Refusal {
  if (typeof part === "string") return { type: "text", text: part };
  if (!isObject(part)) return refuse(`${where} must be a content part object; got ${show(part)}`);
  switch (part.type) {
    case "input_text":
    case "output_text":
    case "text":
      if (typeof part.text !== "string") return refuse(`${where}.text must be a string`);
      return { type: "text", text: part.text };
    case "refusal":
      return { type: "text", text: typeof part.refusal === "string" ? part.refusal : "" };
    case "input_image": {
      if (role !== "user") return refuse(`${where}: only user messages may carry images (this one's role is ${role})`);
      if (typeof part.image_url !== "string" || part.image_url === "") {
        return refuse(`${where}: an input_image needs an image_url (a data: URL); files by file_id are not kept here, send the image inline`);
      }
      const image: JsonObject = { url: part.image_url };
      if (part.detail === "low" || part.detail === "high") image.detail = part.detail;
      return { type: "image_url", image_url: image };
    }
    case "input_audio":
      if (role !== "user") return refuse(`${where}: only user messages may carry audio (this one's role is ${role})`);
      if (!isObject(part.input_audio)) return refuse(`${where}: an input_audio part needs input_audio: {data, format}`);
      return { type: "input_audio", input_audio: part.input_audio };
    case "input_file":
      return refuse(`${where}: input_file parts are not supported here; send the file's text as input_text (or an image as input_image)`);
    default:
      return refuse(`${where}: content part type ${show(part.type)} is not supported; use input_text, input_image or output_text`);
  }
}

const ROLES: Readonly<Record<string, string>> = { user: "user", assistant: "assistant", system: "system", developer: "system" };

/** The tool message's content from a function_call_output's `output` (text only: a chat tool message carries no images). */
function toolOutputOf(output: Json | undefined, where: string): Json | Refusal {
  if (typeof output === "string") return output;
  if (!Array.isArray(output)) return refuse(`${where}.output must be a string or a list of input_text parts`);
  const parts: string[] = [];
  for (const [i, part] of output.entries()) {
    if (!isObject(part) || (part.type !== "input_text" && part.type !== "output_text") || typeof part.text !== "string") {
      return refuse(`${where}.output[${i}]: a function's output reaches the model as text; send input_text parts (images and files in function output are not supported here)`);
    }
    parts.push(part.text);
  }
  return parts.join("\n");
}

/** The conversation in chat messages (after the instructions). */
function messagesOf(input: Json | undefined): Json[] | Refusal {
  if (typeof input === "string") return [{ role: "user", content: input }];
  if (!Array.isArray(input)) return refuse(`"input" must be a string or a list of items (messages, function_call, function_call_output); got ${show(input)}`);
  const messages: JsonObject[] = [];
  for (const [i, item] of input.entries()) {
    const where = `input[${i}]`;
    if (!isObject(item)) return refuse(`${where} must be an object such as {"role": "user", "content": "..."}`);
    const type = item.type ?? "message";
    if (type === "message") {
      const role = typeof item.role === "string" ? ROLES[item.role] : undefined;
      if (!role) return refuse(`${where}.role must be user, assistant, system or developer; got ${show(item.role)}`);
      const content = contentOf(item.content, role, where);
      if (isRefusal(content)) return content;
      messages.push({ role, content });
    } else if (type === "function_call") {
      if (typeof item.call_id !== "string" || typeof item.name !== "string") return refuse(`${where}: a function_call item needs call_id and name (strings)`);
      const args = typeof item.arguments === "string" ? item.arguments : JSON.stringify(item.arguments ?? {});
      const call: JsonObject = { id: item.call_id, type: "function", function: { name: item.name, arguments: args } };
      // Calls made in one turn (and the text before them) are one assistant message in the chat API.
      const last = messages.at(-1);
      if (last?.role === "assistant") last.tool_calls = [...(Array.isArray(last.tool_calls) ? last.tool_calls : []), call];
      else messages.push({ role: "assistant", content: null, tool_calls: [call] });
    } else if (type === "function_call_output") {
      if (typeof item.call_id !== "string") return refuse(`${where}: a function_call_output item needs the call_id of its function_call`);
      const content = toolOutputOf(item.output, where);
      if (isRefusal(content)) return content;
      messages.push({ role: "tool", tool_call_id: item.call_id, content });
    } else if (type === "reasoning") {
      // The model's earlier thinking: chat templates drop it from past turns, so it is not sent.
      continue;
    } else if (type === "item_reference") {
      return refuse(`${where}: item references need stored items, and this server keeps none; send the item itself`);
    } else {
      return refuse(`${where}: input item type ${show(type)} is not supported here; send messages, function_call and function_call_output items`);
    }
  }
  return messages;
}

/** Function tools in the chat API's words; any other kind is refused (the mesh runs no hosted tools). */
function toolsOf(tools: Json | undefined): JsonObject[] | Refusal {
  if (tools === undefined || tools === null) return [];
  if (!Array.isArray(tools)) return refuse(`"tools" must be a list of function tools`);
  const out: JsonObject[] = [];
  for (const [i, tool] of tools.entries()) {
    if (!isObject(tool) || tool.type !== "function") {
      const kind = isObject(tool) ? show(tool.type) : show(tool);
      return refuse(`tools[${i}]: tool type ${kind} is not supported here; only function tools ({"type": "function", "name", "parameters"}) are: this server runs no hosted tools`);
    }
    if (typeof tool.name !== "string" || tool.name === "") return refuse(`tools[${i}]: a function tool needs a name`);
    const fn: JsonObject = { name: tool.name, parameters: isObject(tool.parameters) ? tool.parameters : { type: "object", properties: {} } };
    if (typeof tool.description === "string") fn.description = tool.description;
    if (typeof tool.strict === "boolean") fn.strict = tool.strict;
    out.push({ type: "function", function: fn });
  }
  return out;
}

/** `tool_choice` in the chat API's words, and the tools it leaves the model (`allowed_tools` narrows them). */
function toolChoiceOf(choice: Json | undefined, tools: JsonObject[]): { choice: Json | undefined; tools: JsonObject[] } | Refusal {
  if (choice === undefined || choice === null) return { choice: undefined, tools };
  if (choice === "auto" || choice === "none" || choice === "required") return { choice, tools };
  const named = (t: JsonObject, name: Json | undefined) => isObject(t.function) && t.function.name === name;
  if (isObject(choice) && choice.type === "function" && typeof choice.name === "string") {
    if (!tools.some((t) => named(t, choice.name))) return refuse(`tool_choice names the function ${show(choice.name)}, which is not among "tools"`);
    return { choice: { type: "function", function: { name: choice.name } }, tools };
  }
  if (isObject(choice) && choice.type === "allowed_tools" && Array.isArray(choice.tools) && (choice.mode === "auto" || choice.mode === "required")) {
    const allowed = choice.tools.filter(isObject);
    if (allowed.some((a) => a.type !== "function")) return refuse("tool_choice.allowed_tools may list function tools only");
    return { choice: choice.mode, tools: tools.filter((t) => allowed.some((a) => named(t, a.name))) };
  }
  return refuse(`tool_choice ${show(choice)} is not supported here; use "auto", "none", "required", {"type": "function", "name": ...} or allowed_tools`);
}

/** `text.format` as the chat API's `response_format` (undefined: plain text). */
function responseFormatOf(text: Json | undefined): JsonObject | undefined | Refusal {
  if (text === undefined || text === null) return undefined;
  if (!isObject(text)) return refuse(`"text" must be an object such as {"format": {"type": "json_schema", ...}}`);
  const format = text.format;
  if (format === undefined || format === null) return undefined;
  if (!isObject(format)) return refuse(`text.format must be an object with a type (text, json_object or json_schema)`);
  if (format.type === "text") return undefined;
  if (format.type === "json_object") return { type: "json_object" };
  if (format.type === "json_schema") {
    if (!isObject(format.schema)) return refuse(`text.format of type json_schema needs a "schema" (a JSON Schema object)`);
    const schema: JsonObject = { name: typeof format.name === "string" ? format.name : "response", schema: format.schema };
    if (typeof format.strict === "boolean") schema.strict = format.strict;
    if (typeof format.description === "string") schema.description = format.description;
    return { type: "json_schema", json_schema: schema };
  }
  return refuse(`text.format type ${show(format.type)} is not supported; use text, json_object or json_schema`);
}

const numberOr = (v: Json | undefined, where: string): number | null | Refusal => {
  if (v === undefined || v === null) return null;
  return typeof v === "number" && Number.isFinite(v) ? v : refuse(`"${where}" must be a number; got ${show(v)}`);
};

/** Fields that ask for state or services this server does not keep, and what to do instead. */
function unservable(body: JsonObject): string | undefined {
  if (body.previous_response_id !== undefined && body.previous_response_id !== null) {
    return "previous_response_id is not supported: this server keeps no responses between requests; send the whole conversation in input (earlier messages, function calls and their outputs), and leave previous_response_id out";
  }
  if (body.conversation !== undefined && body.conversation !== null) {
    return "conversation is not supported: this server keeps no conversations; send the whole conversation in input";
  }
  if (body.background === true) return "background responses are not supported: this server keeps no responses to fetch later; leave background out (or stream the answer)";
  if (body.prompt !== undefined && body.prompt !== null) return "stored prompts (prompt) are not supported: this server keeps none; send the instructions and input themselves";
  return undefined;
}

/** The chat completion body for a Responses request, and what its answer repeats; or why it cannot be served. */
export function chatRequestOf(body: JsonObject): { chat: JsonObject; echo: ResponsesEcho } | Refusal {
  const stateful = unservable(body);
  if (stateful) return refuse(stateful);
  if (typeof body.model !== "string") return refuse(`"model" must be a string`);
  const instructions = body.instructions ?? null;
  if (instructions !== null && typeof instructions !== "string") return refuse(`"instructions" must be a string`);
  if (body.input === undefined || body.input === null) return refuse(`"input" is needed: a string, or a list of messages ({"role": "user", "content": "..."})`);
  const conversation = messagesOf(body.input);
  if (isRefusal(conversation)) return conversation;
  const messages: Json[] = instructions === null ? conversation : [{ role: "system", content: instructions }, ...conversation];

  const allTools = toolsOf(body.tools);
  if (isRefusal(allTools)) return allTools;
  const choice = toolChoiceOf(body.tool_choice, allTools);
  if (isRefusal(choice)) return choice;
  const format = responseFormatOf(body.text);
  if (isRefusal(format)) return format;

  const maxOutput = body.max_output_tokens ?? null;
  if (maxOutput !== null && (typeof maxOutput !== "number" || !Number.isInteger(maxOutput) || maxOutput < 1)) {
    return refuse(`"max_output_tokens" must be a whole number of at least 1; got ${show(maxOutput)}`);
  }
  const temperature = numberOr(body.temperature, "temperature");
  if (isRefusal(temperature)) return temperature;
  const topP = numberOr(body.top_p, "top_p");
  if (isRefusal(topP)) return topP;
  const topLogprobs = body.top_logprobs ?? null;
  if (topLogprobs !== null && (typeof topLogprobs !== "number" || !Number.isInteger(topLogprobs) || topLogprobs < 0 || topLogprobs > MAX_TOP_LOGPROBS)) {
    return refuse(`"top_logprobs" must be a whole number from 0 to ${MAX_TOP_LOGPROBS}; got ${show(topLogprobs)}`);
  }
  const logprobs = topLogprobs !== null || (Array.isArray(body.include) && body.include.includes(INCLUDE_LOGPROBS));
  const reasoning = isObject(body.reasoning) ? body.reasoning : {};
  const effort = typeof reasoning.effort === "string" ? reasoning.effort : null;

  const chat: JsonObject = { model: body.model, messages };
  for (const key of LLAMA_EXTRAS) if (body[key] !== undefined) chat[key] = body[key]!;
  if (choice.tools.length > 0) chat.tools = choice.tools;
  if (choice.choice !== undefined) chat.tool_choice = choice.choice;
  if (typeof body.parallel_tool_calls === "boolean") chat.parallel_tool_calls = body.parallel_tool_calls;
  if (format) chat.response_format = format;
  if (maxOutput !== null) chat.max_tokens = maxOutput;
  if (temperature !== null) chat.temperature = temperature;
  if (topP !== null) chat.top_p = topP;
  if (logprobs) {
    chat.logprobs = true;
    chat.top_logprobs = topLogprobs ?? 0;
  }
  if (effort !== null) chat.reasoning_effort = effort;
  if (body.stream === true) {
    chat.stream = true;
    // The usage comes in a last chunk only when asked for; response.completed carries it.
    chat.stream_options = { include_usage: true };
  }

  const echo: ResponsesEcho = {
    model: body.model,
    instructions,
    max_output_tokens: maxOutput,
    temperature,
    top_p: topP,
    top_logprobs: topLogprobs,
    tools: Array.isArray(body.tools) ? body.tools : [],
    tool_choice: body.tool_choice ?? "auto",
    parallel_tool_calls: body.parallel_tool_calls !== false,
    text: { format: isObject(body.text) && isObject(body.text.format) ? body.text.format : { type: "text" } },
    reasoning: { effort, summary: null },
    metadata: isObject(body.metadata) ? body.metadata : {},
    user: typeof body.user === "string" ? body.user : undefined,
    logprobs,
  };
  return { chat, echo };
}
