/**
 * The chat templates a test model carries (Jinja, as llama.cpp's template engine reads them):
 * ChatML for every preset, and for `tools` one that takes tools and writes tool calls, so that
 * llama-server's own tool-call grammar and parser apply to it.
 */
import type { ChatTemplateName } from "./presets.ts";

export const CHATML_TEMPLATE =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/** Filled in by the tool-calling work: until then, ChatML. */
const TOOLS_TEMPLATE = CHATML_TEMPLATE;

export const CHAT_TEMPLATES: Record<ChatTemplateName, string> = { chatml: CHATML_TEMPLATE, tools: TOOLS_TEMPLATE };
