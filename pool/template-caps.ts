/**
 * What a model's chat template can do, as its llama-server's `/props` tells (`chat_template_caps`,
 * read once when the server is ready) (pure). A template without tool calling gets a request that
 * forces a tool call answered in plain text by llama-server, silently; knowing it, the node that
 * serves the model refuses such a request instead (`router/serving/tool-choice.ts`).
 */

export interface TemplateCaps {
  /** The template takes tools and writes tool calls: a forced tool call can be made. */
  toolCalls: boolean;
}

/** The caps `/props` gives; undefined when it gives none (an older server), so nothing is refused on a guess. */
export function templateCapsFromProps(props: unknown): TemplateCaps | undefined {
  const caps = (props as { chat_template_caps?: unknown } | null)?.chat_template_caps;
  if (typeof caps !== "object" || caps === null) return undefined;
  const { supports_tool_calls: calls, supports_tools: tools } = caps as { supports_tool_calls?: unknown; supports_tools?: unknown };
  if (typeof calls !== "boolean" && typeof tools !== "boolean") return undefined;
  // Either one is enough for llama.cpp's tool-call formats to apply; only a template with neither writes no call at all.
  return { toolCalls: calls === true || tools === true };
}
