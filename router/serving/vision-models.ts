/**
 * Images sent to a model that cannot read them. Without a projector llama-server refuses an image
 * part in words meant for whoever started it, and only once the model is loaded, maybe on another
 * node; so the node the client called refuses first, naming the models of the mesh that do read
 * images, before anything loads or goes anywhere.
 */
import type { CatalogModel } from "../../placement/catalog.ts";
import { capabilitiesOfModel } from "../../models/model-capabilities.ts";
import type { ModelInfo } from "../../models/model-store.ts";
import { isObject } from "../http/json.ts";

/** Content part types that carry an image: the chat API's, Anthropic's, the Responses API's. */
const IMAGE_PARTS: ReadonlySet<string> = new Set(["image_url", "image", "input_image"]);

/** Whether a request's messages (as sent: chat completions or Anthropic messages) carry an image (pure). */
export function carriesImage(body: unknown): boolean {
  if (!isObject(body) || !Array.isArray(body.messages)) return false;
  for (const message of body.messages) {
    if (!isObject(message) || !Array.isArray(message.content)) continue;
    for (const part of message.content) {
      if (isObject(part) && typeof part.type === "string" && IMAGE_PARTS.has(part.type)) return true;
      // Anthropic's tool results may hold images too.
      if (isObject(part) && part.type === "tool_result" && carriesImage({ messages: [{ content: part.content }] })) return true;
    }
  }
  return false;
}

/** What this node knows of whether `model` reads images: its own model's files, else what every holder says; undefined when unknown. */
type Known = { name: string; vision: boolean | undefined };

/** The refusal of an image sent to `model`, or undefined when it may go on (pure). A model nobody knows is left to its server. */
export function visionRefusal(model: string, known: readonly Known[]): string | undefined {
  const named = known.find((m) => m.name === model) ?? (model.endsWith(":latest") ? known.find((m) => m.name === model.slice(0, -":latest".length)) : undefined);
  if (named?.vision !== false) return undefined;
  const seeing = [...new Set(known.filter((m) => m.vision === true).map((m) => m.name))].sort();
  const instead = seeing.length
    ? `models of the mesh that do: ${seeing.join(", ")}`
    : "no model of the mesh does: put a vision model's projector (its mmproj GGUF) beside it, named mmproj-<model>.gguf, or pull one that has it";
  return `model "${model}" does not read images (it has no projector); ${instead}`;
}

/**
 * Whether each model reads images, as far as this node can tell before it routes: a copy of its own
 * that reads them does; one that does not reads none only if every holder of the mesh says alike
 * (another's copy with its projector may be the one that answers: its server says otherwise, see
 * `blindCopyRefusal`); another node's model as its holders agree.
 */
export function knownVision(local: readonly ModelInfo[], catalog: readonly Pick<CatalogModel, "name" | "type" | "caps">[]): Known[] {
  const inMesh = new Map(catalog.map((m) => [m.name, m]));
  const agreed = (name: string): boolean | undefined => {
    const entry = inMesh.get(name);
    return entry === undefined ? false : entry.caps === undefined ? undefined : entry.caps.includes("vision");
  };
  const own = local.filter((m) => m.type === "llm").map((m) => ({ name: m.name, vision: capabilitiesOfModel(m).includes("vision") ? true : agreed(m.name) }));
  const mine = new Set(own.map((m) => m.name));
  const theirs = catalog
    .filter((m) => !mine.has(m.name) && (m.type === undefined || m.type === "llm"))
    .map((m) => ({ name: m.name, vision: m.caps === undefined ? undefined : m.caps.includes("vision") }));
  return [...own, ...theirs];
}

/** The refusal of an image by the node whose own copy of `model`, the one about to answer, has no projector (pure). */
export function blindCopyRefusal(model: Pick<ModelInfo, "name" | "type" | "mmproj">, json: unknown): string | undefined {
  if (model.type !== "llm" || model.mmproj !== undefined || !carriesImage(json)) return undefined;
  return `model "${model.name}" does not read images on this node: its copy has no projector (mmproj-${model.name}.gguf beside it)`;
}
