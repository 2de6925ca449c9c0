/**
 * Which models answer embeddings (`/v1/embeddings`, and Ollama's `/api/embed`, which goes through
 * it): embedding models only (`models/model-type.ts`). A chat model's llama-server answers 501
 * with advice for whoever started it ("start it with --embeddings") that a client of the node
 * cannot follow, so the node the client called refuses first, naming the models of the mesh that
 * do embed, before it loads or forwards anything.
 */
import type { CatalogModel } from "../../placement/catalog.ts";
import type { Serving } from "./serving.ts";

/** The refusal of an embeddings request for `model` of kind `type`, or undefined when it may go on (pure). */
export function embeddingsRefusal(model: string, type: string | undefined, embeddingModels: readonly string[]): string | undefined {
  // A kind nobody knows (a model of no holder, an older node's announcement) is left to the model's server.
  if (type === undefined || type === "embedding") return undefined;
  const instead = embeddingModels.length
    ? `models of the mesh that do: ${embeddingModels.join(", ")}`
    : 'no model of the mesh does: add an embedding model (a GGUF with a pooling type, or one labelled "embedding" in models.json)';
  return `model "${model}" does not do embeddings (it is a ${type} model); ${instead}`;
}

interface Known {
  name: string;
  type?: string | undefined;
}

/** `name` among `models`, as the model store finds it (`x:latest` is `x`). */
function named<T extends Known>(models: readonly T[], name: string): T | undefined {
  return models.find((m) => m.name === name) ?? (name.endsWith(":latest") ? models.find((m) => m.name === name.slice(0, -":latest".length)) : undefined);
}

/**
 * The refusal for `model` from what this node knows (pure): its own models first (what it would
 * load), then the mesh's catalog (what its holders announce).
 */
export function embeddingsRefusalFrom(model: string, local: readonly Known[], catalog: readonly Pick<CatalogModel, "name" | "type">[]): string | undefined {
  const type = named(local, model)?.type ?? named(catalog, model)?.type;
  // This node's own models as it knows them; the others as their holders say.
  const kinds = new Map([...catalog, ...local].map((m) => [m.name, m.type]));
  const embedding = [...kinds].filter(([, kind]) => kind === "embedding").map(([name]) => name);
  return embeddingsRefusal(model, type, embedding.sort());
}

/** The refusal for `model` on this node (the store's list as last scanned: a request costs no scan). */
export const embeddingsRefusalOn = (serving: Serving, model: string): string | undefined => embeddingsRefusalFrom(model, serving.localModels(), serving.catalog());
