/**
 * The chat templates a test model carries (Jinja, as llama.cpp's template engine reads them):
 * ChatML for every preset, and for `tools` one that takes tools and writes tool calls, so that
 * llama-server's own tool-call grammar and parser apply to it.
 */
import type { ChatTemplateName } from "./presets.ts";

export const CHATML_TEMPLATE =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/**
 * ChatML with tools in the Qwen2.5 / Hermes 2 Pro shape: the tools as JSON lines inside
 * <tools></tools> in the system turn, each assistant call as <tool_call>{"name", "arguments"}</tool_call>,
 * tool results as <tool_response> blocks in one user turn. No specialised handler in llama.cpp's
 * common/chat.cpp matches it, so its differential auto-parser reads the markers from renderings of
 * the template (format "peg-native", tool calls as JSON with a schema grammar). That is the path
 * llama.cpp's own tests take for Qwen2.5 and Hermes 2 Pro, and the only one where a random model's
 * plain text still parses as content; the specialised formats that force a call at once (Cohere2,
 * Functionary) reject text outside their markers. The preamble is short because every character
 * of it is a token to our vocabulary. Unlike Qwen2.5, no newline inside the markers: the tools model
 * is programmed to call (TOOL_CALL_BIGRAMS in llama-model.ts), and "<tool_call>\n" after the
 * generation prompt's "\n" would make it loop. Without tools it renders exactly as CHATML_TEMPLATE.
 */
const TOOLS_TEMPLATE =
  "{%- if tools %}" +
  "{{- '<|im_start|>system\\n' }}" +
  "{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] + '\\n\\n' }}{%- endif %}" +
  "{{- '# Tools\\n<tools>' }}" +
  "{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}" +
  "{{- '\\n</tools>\\nCall one as <tool_call>{\"name\": <name>, \"arguments\": <object>}</tool_call><|im_end|>\\n' }}" +
  "{%- elif messages[0]['role'] == 'system' %}" +
  "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}" +
  "{%- endif %}" +
  "{%- for message in messages %}" +
  "{%- if message.role == 'user' or (message.role == 'system' and not loop.first) or (message.role == 'assistant' and not message.tool_calls) %}" +
  "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}" +
  "{%- elif message.role == 'assistant' %}" +
  "{{- '<|im_start|>assistant' }}" +
  "{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}" +
  "{%- for tool_call in message.tool_calls %}" +
  "{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}" +
  "{{- '\\n<tool_call>{\"name\": \"' + tool_call.name + '\", \"arguments\": ' + (tool_call.arguments | tojson) + '}</tool_call>' }}" +
  "{%- endfor %}" +
  "{{- '<|im_end|>\\n' }}" +
  "{%- elif message.role == 'tool' %}" +
  "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}" +
  "{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}" +
  "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}" +
  "{%- endif %}" +
  "{%- endfor %}" +
  "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

export const CHAT_TEMPLATES: Record<ChatTemplateName, string> = { chatml: CHATML_TEMPLATE, tools: TOOLS_TEMPLATE };
