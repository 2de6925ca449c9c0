/**
 * How Ollama describes a model (pure): the `/api/tags` and `/api/ps` entries and `/api/show`'s
 * details, model_info and capabilities, from what the model store knows (the GGUF header facts),
 * and for a model on another node of the mesh, from what its catalog entry says (what its holders
 * announce: size, family, weights, quant; where it is served).
 * Ollama's `digest` is the sha256 of the weights; hashing gigabytes on a list is not worth it, so
 * ours is the sha256 of the file's identity (path, size, modification time): stable while the
 * file is unchanged, different when it changes.
 */
import { createHash } from "node:crypto";
import type { CatalogModel } from "../../placement/catalog.ts";
import { capabilitiesOf, capabilitiesOfModel } from "../../models/model-capabilities.ts";
import type { ModelInfo } from "../../models/model-store.ts";
import { taggedName, type JsonObject } from "./ollama-mapping.ts";
import { isObject } from "../http/json.ts";

export function digestOf(path: string, sizeBytes: number, mtimeMs: number): string {
  return createHash("sha256").update(`${path}\0${sizeBytes}\0${mtimeMs}`).digest("hex");
}

/** What Ollama's details tell of a model, where known: family (GGUF architecture), weights, quant. */
export interface ModelDescription {
  family?: string | undefined;
  parameters?: number | undefined;
  quant?: string | undefined;
}

export const describeLocal = (m: ModelInfo): ModelDescription => ({ family: m.facts?.architecture, parameters: m.parameters, quant: m.quant });

/** Fixed decimals by magnitude, as Ollama's `format.HumanNumber` writes them. */
const decimals = (n: number) => n.toFixed(n >= 100 ? 0 : n >= 10 ? 1 : 2);

/** A weight count as Ollama's `parameter_size` ("8.03B", "494M", "22.7K", "600"); empty when unknown. */
export function parameterSize(count: number | undefined): string {
  if (count === undefined || !Number.isFinite(count) || count < 0) return "";
  for (const [unit, scale] of [["T", 1e12], ["B", 1e9], ["M", 1e6], ["K", 1e3]] as const) if (count >= scale) return `${decimals(count / scale)}${unit}`;
  return String(Math.floor(count));
}

/** Ollama's details. */
export function detailsOf(d: ModelDescription | undefined): JsonObject {
  const family = d?.family ?? "";
  return { parent_model: "", format: "gguf", family, families: family ? [family] : [], parameter_size: parameterSize(d?.parameters), quantization_level: d?.quant ?? "" };
}

export function tagsEntry(m: ModelInfo, mtimeMs: number): JsonObject {
  return {
    name: taggedName(m.name),
    model: taggedName(m.name),
    modified_at: new Date(mtimeMs).toISOString(),
    size: m.sizeBytes,
    digest: digestOf(m.path, m.sizeBytes, mtimeMs),
    details: detailsOf(describeLocal(m)),
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
    details: detailsOf(m),
  };
}

/** When Ollama shows a model that does not expire: a date far ahead, as Ollama writes it for keep_alive -1. */
const NEVER = Date.UTC(2318, 0, 1);

/**
 * The models other nodes of the mesh have loaded, for `/api/ps` beside this node's own (pure):
 * each one some node serves now and that is not among `loadedHere`, with the node serving it in
 * its details (`served_by`), and when it unloads as that node said (`expiries`: its own `/api/ps`,
 * by model and node); a node that did not say shows it as not expiring.
 */
export function meshPsEntries(catalog: readonly CatalogModel[], loadedHere: ReadonlySet<string>, self: string | undefined, expiries: ReadonlyMap<string, string> = new Map()): JsonObject[] {
  const out: JsonObject[] = [];
  for (const m of catalog) {
    if (loadedHere.has(m.name)) continue;
    const servedBy = m.servers.find((id) => id !== self);
    if (servedBy === undefined) continue;
    const { modified_at: _, details, ...rest } = remoteTagsEntry(m);
    const expires = expiries.get(expiryKey(servedBy, taggedName(m.name))) ?? new Date(NEVER).toISOString();
    out.push({ ...rest, details: { ...(details as JsonObject), served_by: servedBy }, expires_at: expires, size_vram: 0 });
  }
  return out;
}

/** The nodes whose word `meshPsEntries` would show: the first other server of each model some other node serves. */
export function psPeers(catalog: readonly CatalogModel[], loadedHere: ReadonlySet<string>, self: string | undefined): string[] {
  const peers = new Set<string>();
  for (const m of catalog) {
    const servedBy = loadedHere.has(m.name) ? undefined : m.servers.find((id) => id !== self);
    if (servedBy !== undefined) peers.add(servedBy);
  }
  return [...peers];
}

const expiryKey = (node: string, model: string) => `${node}\u0000${model}`;
/** Latest an expiry a node says may be: Ollama's own "never" (`NEVER`) and anything sooner. */
const LATEST_EXPIRY = NEVER;

/**
 * When each model `node` has loaded unloads, from its `/api/ps` answer (pure, a member's claim:
 * shown, never acted on): only entries it names itself the server of, with a date no later than
 * Ollama's "never"; anything else is left out.
 */
export function psExpiries(node: string, answer: unknown, into: Map<string, string> = new Map()): Map<string, string> {
  const models = isObject(answer) && Array.isArray(answer.models) ? answer.models : [];
  for (const entry of models.slice(0, MAX_PS_ENTRIES)) {
    if (!isObject(entry) || typeof entry.model !== "string" || entry.model.length > 512 || typeof entry.expires_at !== "string") continue;
    if (!isObject(entry.details) || entry.details.served_by !== node) continue;
    const at = Date.parse(entry.expires_at);
    if (!Number.isFinite(at) || at < 0 || at > LATEST_EXPIRY) continue;
    into.set(expiryKey(node, entry.model), new Date(at).toISOString());
  }
  return into;
}

/** Entries of a member's `/api/ps` read: a node loads a few models, never thousands. */
const MAX_PS_ENTRIES = 1024;

/** `/api/show` of a model only another node has: what the mesh's catalog says of it. */
export function remoteShowAnswer(m: CatalogModel): JsonObject {
  const info: JsonObject = {};
  if (m.family) info["general.architecture"] = m.family;
  if (m.parameters !== undefined) info["general.parameter_count"] = m.parameters;
  // Its kind and what it can be asked, as its holders agree on them.
  return { license: "", modelfile: "", parameters: "", template: "", details: detailsOf(m), model_info: info, capabilities: capabilitiesOf(m.type, m.caps ?? []) };
}

/**
 * A loaded model for `/api/ps`: it expires `idleUnloadMs` (its own, from a `keep_alive`, or the
 * node's) after its last use (never, with idle unload off, which Ollama shows as a far-future time).
 */
export function psEntry(m: ModelInfo, mtimeMs: number, lastUse: number, idleUnloadMs: number, self?: string): JsonObject {
  const expires = idleUnloadMs > 0 ? lastUse + idleUnloadMs : NEVER;
  const { modified_at: _, details, ...rest } = tagsEntry(m, mtimeMs);
  // In a mesh, which node has it loaded: this one (as `meshPsEntries` names the others).
  return { ...rest, details: { ...(details as JsonObject), ...(self ? { served_by: self } : {}) }, expires_at: new Date(expires).toISOString(), size_vram: 0 };
}


/** `/api/show`: what we know of the model, in Ollama's fields. */
export function showAnswer(m: ModelInfo, mtimeMs: number): JsonObject {
  const f = m.facts;
  const arch = f?.architecture;
  const info: JsonObject = {};
  if (m.parameters !== undefined) info["general.parameter_count"] = m.parameters;
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
    details: detailsOf(describeLocal(m)),
    model_info: info,
    capabilities: capabilitiesOf(m.type, capabilitiesOfModel(m)),
    modified_at: new Date(mtimeMs).toISOString(),
  };
}
