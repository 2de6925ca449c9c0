/**
 * Requests a client sends in words the mesh does not pass on as they are, turned into ones it
 * does, and their answers turned back. The turn happens on the node the client called, so a
 * request crosses the mesh in words every node's llama-server speaks, and the client hears its own
 * dialect whichever node answered (and whatever version of llama-server that node runs).
 * Each translator is keyed by the public path it serves (`/v1/...`).
 */
import { messagesTranslator } from "./anthropic-stop.ts";
import { completionsTranslator } from "./legacy-completions.ts";
import { responsesTranslator } from "./responses-dialect.ts";
import type { Translator } from "./translation.ts";

/** The translators, by the public path they serve. */
export const TRANSLATORS: Readonly<Record<string, Translator>> = {
  "/v1/completions": completionsTranslator,
  "/v1/messages": messagesTranslator,
  "/v1/responses": responsesTranslator,
};
