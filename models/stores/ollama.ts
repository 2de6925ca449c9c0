/**
 * Ollama's model store (`$OLLAMA_MODELS`, else `~/.ollama/models`): a manifest per model at
 * `manifests/<host>/<namespace>/<model>/<tag>` (JSON; its layers name blobs by digest), the weights
 * in `blobs/sha256-<hex>`, a GGUF without the extension, which llama-server loads as it is. A
 * manifest is read within a size bound and checked with zod; one that is not a model's (junk, a
 * bad digest, a blob that is missing or no GGUF) is passed over without a word, as Ollama would not
 * run it either. Models are named as `ollama list` names them, `:latest` left out (our names carry
 * no tag; the Ollama API shows it again).
 */
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import type { StoreModel } from "./stores.ts";
import { isWatchedGguf, readDir, watchPath, type ScanState } from "./walk.ts";

const OLLAMA_DEFAULT_HOST = "registry.ollama.ai";
const OLLAMA_DEFAULT_NAMESPACE = "library";
const MODEL_LAYER = "application/vnd.ollama.image.model";
const PROJECTOR_LAYER = "application/vnd.ollama.image.projector";
/** Real manifests are a few hundred bytes per layer. */
export const MAX_MANIFEST_BYTES = 256 * 1024;

const HOST_PART = /^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}$/;
const NAME_PART = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;
const DIGEST = /^sha256:([0-9a-f]{64})$/;

/**
 * The name of the model at `manifests/<host>/<namespace>/<model>/<tag>`, as Ollama shows it (pure):
 * `llama3.2` (library, tag latest), `qwen2.5:0.5b`, `ns/model:tag`, `hf.co/org/repo:Q4_K_M`;
 * undefined when a part is not one Ollama could have written.
 */
export function ollamaModelName(host: string, namespace: string, model: string, tag: string): string | undefined {
  if (!HOST_PART.test(host) || ![namespace, model, tag].every((p) => NAME_PART.test(p)) || [host, namespace, model, tag].some((p) => p.includes(".."))) return undefined;
  const base = host === OLLAMA_DEFAULT_HOST ? (namespace === OLLAMA_DEFAULT_NAMESPACE ? model : `${namespace}/${model}`) : `${host}/${namespace}/${model}`;
  return tag === "latest" ? base : `${base}:${tag}`;
}

const Layer = z.object({ mediaType: z.string().max(256), digest: z.string().max(256) });
const Manifest = z.object({ layers: z.array(Layer).max(256) });

/** The blobs (hex digests) a manifest's text names for the model and its projector (pure); undefined for no model's manifest. */
export function parseOllamaManifest(text: string): { model: string; projector: string | undefined } | undefined {
  if (text.length > MAX_MANIFEST_BYTES) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return undefined;
  }
  const parsed = Manifest.safeParse(json);
  if (!parsed.success) return undefined;
  const digestOf = (mediaType: string): string | null | undefined => {
    const layer = parsed.data.layers.find((l) => l.mediaType === mediaType);
    if (!layer) return undefined;
    return DIGEST.exec(layer.digest)?.[1] ?? null;
  };
  const model = digestOf(MODEL_LAYER);
  const projector = digestOf(PROJECTOR_LAYER);
  if (!model || projector === null) return undefined;
  return { model, projector };
}

const blobPath = (root: string, hex: string) => join(root, "blobs", `sha256-${hex}`);

function readManifest(path: string): string | undefined {
  try {
    const st = statSync(path);
    if (!st.isFile() || st.size > MAX_MANIFEST_BYTES) return undefined;
    return readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
}

export function scanOllama(root: string, scan: ScanState): StoreModel[] {
  const out: StoreModel[] = [];
  const manifests = join(root, "manifests");
  // A pull adds blobs before its manifest; a removal takes both: either changes a folder we watch.
  watchPath(join(root, "blobs"), scan);
  const dirs = (dir: string) => readDir(dir, scan).filter((e) => e.isDirectory());
  for (const host of dirs(manifests)) {
    for (const ns of dirs(join(manifests, host.name))) {
      for (const model of dirs(join(manifests, host.name, ns.name))) {
        const modelDir = join(manifests, host.name, ns.name, model.name);
        for (const tag of readDir(modelDir, scan)) {
          if (!tag.isFile()) continue;
          const name = ollamaModelName(host.name, ns.name, model.name, tag.name);
          if (!name) continue;
          const file = join(modelDir, tag.name);
          // A re-pull rewrites a manifest in place: its own stat is watched, not only its folder's.
          watchPath(file, scan);
          const text = readManifest(file);
          const layers = text === undefined ? undefined : parseOllamaManifest(text);
          if (!layers) continue;
          const path = blobPath(root, layers.model);
          if (!isWatchedGguf(path, scan)) continue;
          const projector = layers.projector && blobPath(root, layers.projector);
          const mmproj = projector && isWatchedGguf(projector, scan) ? projector : undefined;
          out.push({ name, path, files: [path], mmproj, missingShards: [] });
        }
      }
    }
  }
  return out;
}
