/**
 * The models this node can serve: GGUF files under the models dir, the registry beside them, and
 * files named with `--model PATH`. Rescanned on demand (a readdir and a stat per file); GGUF
 * headers are read once per file version.
 */
import { existsSync, readdirSync, statSync } from "node:fs";
import { basename, isAbsolute, join, relative, resolve } from "node:path";
import { Device, recipeDevices, type DeviceMask, type Recipe } from "../pool/devices.ts";
import { readGgufFacts, type GgufFacts } from "./gguf-info.ts";
import { groupModelFiles } from "./model-files.ts";
import { modelTypeOf, type ModelType } from "./model-type.ts";
import { readRegistry, REGISTRY_FILE, type RegistryEntry } from "./registry.ts";

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
  source: string | undefined;
  /** Undefined when the header could not be read; the model is listed and fails when loaded. */
  facts: GgufFacts | undefined;
  /** Why it cannot load as it is (missing shards), if so. */
  problem: string | undefined;
}

export interface ModelStoreOptions {
  modelsDir: string;
  /** `--model` values that are paths to files outside the scan. */
  extraFiles: string[];
  hasGpu: boolean;
}

const MAX_DEPTH = 4;

function listGguf(root: string): string[] {
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

export class ModelStore {
  private factsCache = new Map<string, { key: string; facts: GgufFacts | undefined }>();
  private models: ModelInfo[] = [];

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

  private async describe(
    name: string,
    path: string,
    files: string[],
    mmproj: string | undefined,
    entry: Partial<RegistryEntry>,
    problem: string | undefined,
  ): Promise<ModelInfo> {
    const facts = await this.facts(path);
    const labels = entry.labels ?? [];
    const recipe = entry.recipe ?? "llamacpp";
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
      source: entry.source,
      facts,
      problem,
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
      const info = await this.describe(reg?.name ?? group.name, path, group.files.map(abs), mmproj, reg?.entry ?? {}, problem);
      out.set(info.name, info);
      claimed.add(path);
    }
    // Registry entries whose file lies elsewhere (or is missing: listed, and a load says not found).
    for (const [name, e] of Object.entries(registry)) {
      const path = resolve(abs(e.file));
      if (claimed.has(path) || out.has(name)) continue;
      out.set(name, await this.describe(name, path, [path], e.mmproj && abs(e.mmproj), e, undefined));
      claimed.add(path);
    }
    for (const file of this.opts.extraFiles) {
      const path = resolve(file);
      if (claimed.has(path)) continue;
      const name = basename(path).replace(/\.gguf$/i, "");
      if (!out.has(name)) out.set(name, await this.describe(name, path, [path], undefined, {}, undefined));
    }
    this.models = [...out.values()].sort((a, b) => a.name.localeCompare(b.name));
    return this.models;
  }

  /** The model of that name, rescanning first when it is not known yet (a file just copied in). */
  async find(name: string): Promise<ModelInfo | undefined> {
    const known = this.models.find((m) => m.name === name);
    if (known) return known;
    return (await this.refresh()).find((m) => m.name === name);
  }

  list(): readonly ModelInfo[] {
    return this.models;
  }

  /** Where new model files go (a copy's links, downloads). */
  get modelsDir(): string {
    return this.opts.modelsDir;
  }
}
