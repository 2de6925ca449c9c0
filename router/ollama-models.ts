/**
 * How Ollama describes a model (pure): the `/api/tags` and `/api/ps` entries and `/api/show`'s
 * details, model_info and capabilities, from what the model store knows (the GGUF header facts).
 * Ollama's `digest` is the sha256 of the weights; hashing gigabytes on a list is not worth it, so
 * ours is the sha256 of the file's identity (path, size, modification time): stable while the
 * file is unchanged, different when it changes.
 */
import { createHash } from "node:crypto";
import type { CatalogModel } from "../mesh/catalog.ts";
import type { ModelInfo } from "../models/model-store.ts";
import { taggedName, type JsonObject } from "./ollama-mapping.ts";

export function digestOf(path: string, sizeBytes: number, mtimeMs: number): string {
  return createHash("sha256").update(`${path}\0${sizeBytes}\0${mtimeMs}`).digest("hex");
}

/** Ollama's details; the parameter count is not among the facts we read: empty. */
export function detailsOf(m: Pick<ModelInfo, "facts" | "quant"> | undefined): JsonObject {
  const family = m?.facts?.architecture ?? "";
  return { parent_model: "", format: "gguf", family, families: family ? [family] : [], parameter_size: "", quantization_level: m?.quant ?? "" };
}

export function tagsEntry(m: ModelInfo, mtimeMs: number): JsonObject {
  return {
    name: taggedName(m.name),
    model: taggedName(m.name),
    modified_at: new Date(mtimeMs).toISOString(),
    size: m.sizeBytes,
    digest: digestOf(m.path, m.sizeBytes, mtimeMs),
    details: detailsOf(m),
  };
}

/** A model another node of the mesh has: usable here (requests are routed), described as far as the catalog says. */
export function remoteTagsEntry(m: CatalogModel): JsonObject {
  return {
    name: taggedName(m.name),
    model: taggedName(m.name),
    modified_at: new Date(0).toISOString(),
    size: m.sizeBytes,
    digest: digestOf(`mesh:${m.name}`, m.sizeBytes, 0),
    details: detailsOf(undefined),
  };
}

/**
 * A loaded model for `/api/ps`: it expires `idleUnloadMs` (its own, from a `keep_alive`, or the
 * node's) after its last use (never, with idle unload off, which Ollama shows as a far-future time).
 */
export function psEntry(m: ModelInfo, mtimeMs: number, lastUse: number, idleUnloadMs: number): JsonObject {
  const expires = idleUnloadMs > 0 ? lastUse + idleUnloadMs : Date.UTC(2318, 0, 1);
  const { modified_at: _, ...rest } = tagsEntry(m, mtimeMs);
  return { ...rest, expires_at: new Date(expires).toISOString(), size_vram: 0 };
}

export function capabilitiesOf(m: Pick<ModelInfo, "type" | "mmproj">): string[] {
  if (m.type === "embedding") return ["embedding"];
  if (m.type === "reranking") return [];
  return m.mmproj ? ["completion", "vision"] : ["completion"];
}

/** `/api/show`: what we know of the model, in Ollama's fields. */
export function showAnswer(m: ModelInfo, mtimeMs: number): JsonObject {
  const f = m.facts;
  const arch = f?.architecture;
  const info: JsonObject = {};
  if (arch) {
    info["general.architecture"] = arch;
    if (f?.name) info["general.name"] = f.name;
    const put = (key: string, v: number | undefined) => {
      if (v !== undefined) info[`${arch}.${key}`] = v;
    };
    put("context_length", f?.contextLength);
    put("block_count", f?.blockCount);
    put("embedding_length", f?.embeddingLength);
    put("attention.head_count", f?.headCount);
    put("attention.head_count_kv", f?.headCountKv);
    put("pooling_type", f?.poolingType);
  }
  return {
    license: "",
    modelfile: `# served by mesh from ${m.path}\nFROM ${m.path}\n`,
    parameters: m.ctxSize ? `num_ctx ${m.ctxSize}` : "",
    // llama-server applies the chat template from the GGUF; we do not read it out.
    template: "",
    details: detailsOf(m),
    model_info: info,
    capabilities: capabilitiesOf(m),
    modified_at: new Date(mtimeMs).toISOString(),
  };
}
