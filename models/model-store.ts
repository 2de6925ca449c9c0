/**
 * The models this node can serve: GGUF files under the models dir, the registry beside them, files
 * named with `--model PATH`, and the models other tools' stores hold (Ollama, LM Studio, the
 * Hugging Face cache, llama.cpp's cache, MESH_MODEL_STORES folders), used where they lie and named
 * by the rule in stores/stores.ts. Rescanned on demand (a readdir and a stat per file; a store only
 * when a folder it read has changed); GGUF headers are read once per file version.
 */
import { existsSync, readdirSync, realpathSync, statSync } from "node:fs";
import { basename, isAbsolute, join, relative, resolve } from "node:path";
import { Device, recipeDevices, type DeviceMask, type Recipe } from "./recipe-devices.ts";
import { quantName, readGgufFacts, type GgufFacts } from "./gguf-info.ts";
import { groupModelFiles } from "./model-files.ts";
import { modelTypeOf, type ModelType } from "./model-type.ts";
import { readRegistry, REGISTRY_FILE, type RegistryEntry } from "./registry.ts";
import { StoreScanner } from "./stores/scan.ts";
import { storeModelName, type ModelStoreKind, type StoreRoot } from "./stores/stores.ts";

/**
 * Where a model's files lie: "models-dir" (mesh's own, under --models-dir or in its models.json),
 * "path" (a `--model PATH`), another tool's store, or "extra" (a MESH_MODEL_STORES folder). Only
 * "models-dir" files are mesh's to remove.
 */
export type { ModelStoreKind } from "./stores/stores.ts";

export interface ModelInfo {
  name: string;
  /** Absolute path given to llama-server `-m`. */
  path: string;
  files: string[];
  mmproj: string | undefined;
  sizeBytes: number;
  type: ModelType;
  labels: string[];
  recipe: Recipe;
  devices: DeviceMask;
  ctxSize: number | undefined;
  llamacppArgs: string | undefined;
  /** The draft model models.json names for it (a model name, checked when it loads: `model-draft.ts`). */
  draft?: string;
  source: string | undefined;
  /** Undefined when the header could not be read; the model is listed and fails when loaded. */
  facts: GgufFacts | undefined;
  /** Why it cannot load as it is (missing shards), if so. */
  problem: string | undefined;
  store: ModelStoreKind;
  /** The reference it was pulled by (models.json `ref`), if mesh pulled it. */
  ref: string | undefined;
  /** mesh downloaded it itself (models.json `pulled`: a pull, or a copy from a peer): only such a model may be deleted. */
  pulled: boolean;
  /** From the GGUF's `general.file_type`: "Q4_K_M", "Q8_0", "F16"...; undefined when unknown. */
  quant: string | undefined;
  /** Its weights, every shard's together; absent when a header could not be read. */
  parameters?: number;
  /** When its (first) file was last written, in ms since the epoch; absent when it is not there. */
  modifiedMs?: number;
}

export interface ModelStoreOptions {
  modelsDir: string;
  /** `--model` values that are paths to files outside the scan. */
  extraFiles: string[];
  hasGpu: boolean;
  /** Other tools' stores to serve from, in naming order (`modelStoreRoots`); none by default. */
  stores?: readonly StoreRoot[];
}

const MAX_DEPTH = 4;

/** Every `.gguf` under `root` (hidden folders and files skipped), relative to it. */
export function listGguf(root: string): string[] {
  if (!existsSync(root)) return [];
  const out: string[] = [];
  const walk = (dir: string, depth: number) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.name.startsWith(".")) continue;
      const full = join(dir, entry.name);
      if (entry.isDirectory() && depth < MAX_DEPTH) walk(full, depth + 1);
      else if (/\.gguf$/i.test(entry.name) && (entry.isFile() || entry.isSymbolicLink())) out.push(relative(root, full));
    }
  };
  walk(root, 0);
  return out;
}

function fileSize(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

function modifiedMsOf(path: string): number | undefined {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return undefined;
  }
}

export class ModelStore {
  private factsCache = new Map<string, { key: string; facts: GgufFacts | undefined }>();
  private models: ModelInfo[] = [];
  private readonly scanner = new StoreScanner();

  constructor(private readonly opts: ModelStoreOptions) {}

  private async facts(path: string): Promise<GgufFacts | undefined> {
    let key: string;
    try {
      const st = statSync(path);
      key = `${st.size}:${st.mtimeMs}`;
    } catch {
      return undefined;
    }
    const hit = this.factsCache.get(path);
    if (hit?.key === key) return hit.facts;
    const facts = await readGgufFacts(path).catch(() => undefined);
    this.factsCache.set(path, { key, facts });
    return facts;
  }

  /** The weights of a model's files: its one file's, or the sum over a split model's shards. */
  private async parameters(files: readonly string[], first: GgufFacts | undefined): Promise<number | undefined> {
    if (files.length <= 1) return first?.parameterCount;
    let total = 0;
    for (const file of files) {
      const count = (await this.facts(file))?.parameterCount;
      if (count === undefined) return undefined;
      total += count;
    }
    return total;
  }

  private async describe(
    name: string,
    path: string,
    files: string[],
    mmproj: string | undefined,
    entry: Partial<RegistryEntry>,
    problem: string | undefined,
    store: ModelStoreKind,
  ): Promise<ModelInfo> {
    const facts = await this.facts(path);
    const parameters = await this.parameters(files, facts);
    const labels = entry.labels ?? [];
    const recipe = entry.recipe ?? "llamacpp";
    const modifiedMs = modifiedMsOf(path);
    return {
      name,
      path,
      files,
      mmproj,
      sizeBytes: files.reduce((sum, f) => sum + fileSize(f), 0),
      type: modelTypeOf({ labels, architecture: facts?.architecture, poolingType: facts?.poolingType }),
      labels,
      recipe,
      devices: recipeDevices(recipe, this.opts.hasGpu) || Device.CPU,
      ctxSize: entry.ctx_size,
      llamacppArgs: entry.llamacpp_args,
      draft: entry.draft,
      source: entry.source,
      facts,
      problem,
      store,
      ref: entry.ref,
      pulled: entry.pulled === true,
      quant: quantName(facts?.fileType),
      ...(parameters !== undefined ? { parameters } : {}),
      ...(modifiedMs !== undefined ? { modifiedMs } : {}),
    };
  }

  /** Scans again and returns every model, sorted by name. */
  async refresh(): Promise<ModelInfo[]> {
    const root = this.opts.modelsDir;
    const registry = readRegistry(join(root, REGISTRY_FILE));
    const abs = (p: string) => (isAbsolute(p) ? p : join(root, p));
    const byPath = new Map(Object.entries(registry).map(([name, e]) => [resolve(abs(e.file)), { name, entry: e }]));
    const out = new Map<string, ModelInfo>();
    const claimed = new Set<string>();

    for (const group of groupModelFiles(listGguf(root))) {
      const path = resolve(abs(group.path));
      const reg = byPath.get(path);
      const problem = group.missingShards.length ? `split model is missing shard(s) ${group.missingShards.join(", ")}` : undefined;
      const mmproj = reg?.entry.mmproj ? abs(reg.entry.mmproj) : group.mmproj && abs(group.mmproj);
      const info = await this.describe(reg?.name ?? group.name, path, group.files.map(abs), mmproj, reg?.entry ?? {}, problem, "models-dir");
      out.set(info.name, info);
      claimed.add(path);
    }
    // Registry entries whose file lies elsewhere (or is missing: listed, and a load says not found).
    for (const [name, e] of Object.entries(registry)) {
      const path = resolve(abs(e.file));
      if (claimed.has(path) || out.has(name)) continue;
      out.set(name, await this.describe(name, path, [path], e.mmproj && abs(e.mmproj), e, undefined, "models-dir"));
      claimed.add(path);
    }
    for (const file of this.opts.extraFiles) {
      const path = resolve(file);
      if (claimed.has(path)) continue;
      const name = basename(path).replace(/\.gguf$/i, "");
      if (!out.has(name)) out.set(name, await this.describe(name, path, [path], undefined, {}, undefined, "path"));
    }
    await this.addStores(out);
    const scanned = [...out.values()].sort((a, b) => a.name.localeCompare(b.name));
    // The same list as before stays the same list: what is worked out from it (the announced disk,
    // the mesh's catalog) is kept by its identity, and a request for an unknown model rescans.
    if (!Bun.deepEquals(scanned, this.models)) this.models = scanned;
    return this.models;
  }

  /** The stores' models after mesh's own, named by the rule in stores/stores.ts. */
  private async addStores(out: Map<string, ModelInfo>): Promise<void> {
    const roots = this.opts.stores ?? [];
    if (roots.length === 0) return;
    const real = (p: string) => {
      try {
        return realpathSync(p);
      } catch {
        return p;
      }
    };
    // Which root listed each real file first (-1: mesh's own), so a file is listed once.
    const listedBy = new Map<string, number>();
    for (const m of out.values()) listedBy.set(real(m.path), -1);
    for (const [index, root] of roots.entries()) {
      for (const m of this.scanner.scan(root)) {
        const file = real(m.path);
        const by = listedBy.get(file);
        if (by !== undefined && by !== index) continue;
        listedBy.set(file, index);
        const name = storeModelName(m.name, root.kind, out);
        if (name === undefined) continue;
        const problem = m.missingShards.length ? `split model is missing shard(s) ${m.missingShards.join(", ")}` : undefined;
        out.set(name, await this.describe(name, m.path, m.files, m.mmproj, {}, problem, root.kind));
      }
    }
  }

  /**
   * The model of that name, rescanning first when it is not known yet (a file just copied in).
   * `x:latest` is `x` when there is no `x:latest` (our names carry no tag, as in the Ollama API).
   */
  async find(name: string): Promise<ModelInfo | undefined> {
    const pick = (list: readonly ModelInfo[]) =>
      list.find((m) => m.name === name) ?? (name.endsWith(":latest") ? list.find((m) => m.name === name.slice(0, -":latest".length)) : undefined);
    return pick(this.models) ?? pick(await this.refresh());
  }

  list(): readonly ModelInfo[] {
    return this.models;
  }

  /** Where new model files go (a copy's links, downloads). */
  get modelsDir(): string {
    return this.opts.modelsDir;
  }
}
