/**
 * What a chat model can be asked beyond text (pure): to read images (a projector beside it) and to
 * call tools (a chat template that takes them), in the words clients know: Ollama's `/api/show`
 * capabilities and Lemonade's labels. A node says it of its own models in its announcement; of
 * another node's model the catalog shows what every holder says alike (`placement/catalog.ts`).
 */
import type { ModelInfo } from "./model-store.ts";

export const CAPABILITIES = ["tools", "vision"] as const;
export type Capability = (typeof CAPABILITIES)[number];

/** Lemonade's labels for them (its model list and its web UI's image button read these). */
const LABELS: Readonly<Record<Capability, string>> = { tools: "tool-calling", vision: "vision" };

export function capabilitiesOfModel(m: Pick<ModelInfo, "type" | "mmproj" | "facts" | "labels">): Capability[] {
  if (m.type !== "llm") return [];
  const caps: Capability[] = [];
  // The operator may say so in models.json (Lemonade's label) of a template our reading misses.
  if (m.facts?.templateTakesTools === true || m.labels.some((l) => l.toLowerCase() === LABELS.tools)) caps.push("tools");
  if (m.mmproj !== undefined) caps.push("vision");
  return caps;
}

/** Its labels with those its capabilities give, each once. */
export const labelsWith = (labels: readonly string[], caps: readonly string[]): string[] => [...new Set([...labels, ...caps.flatMap((c) => (isCapability(c) ? [LABELS[c]] : []))])];

const isCapability = (c: string): c is Capability => (CAPABILITIES as readonly string[]).includes(c);

/** What a peer announced, as this node reads it: the capabilities it knows, each once, in their order; anything else is dropped. */
export function announcedCapabilities(value: readonly string[]): Capability[] {
  return CAPABILITIES.filter((c) => value.includes(c));
}

/** A model's `capabilities` in Ollama's words (`/api/show`, and `/v1/models` too): of kind `type`, asked `caps` besides text. */
export function capabilitiesOf(type: string | undefined, caps: readonly string[]): string[] {
  if (type === "embedding") return ["embedding"];
  if (type === "reranking") return [];
  return ["completion", ...caps];
}
