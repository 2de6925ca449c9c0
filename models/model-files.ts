/**
 * Which GGUF files make which models, from file names alone (pure): split GGUFs
 * (`name-00001-of-00003.gguf`) are one model, loaded through their first shard; a projector
 * (`mmproj` in its name) pairs with the model beside it; a model's name is its file name without
 * `.gguf` and without the shard suffix, qualified by its folder when two folders share a name.
 */
import { basename, dirname, join } from "node:path";

export interface ModelFiles {
  name: string;
  /** The file llama-server is given (`-m`): the model itself or its first shard. Relative to the scan root. */
  path: string;
  /** Every file of the model, shards in order. */
  files: string[];
  /** A vision/audio projector beside it. */
  mmproj: string | undefined;
  /** Shards missing from a split model; such a model cannot load. */
  missingShards: number[];
}

const SHARD = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/i;
const isProjector = (file: string) => /mmproj/i.test(basename(file));
const stem = (file: string) => basename(file).replace(/\.gguf$/i, "");

/** The projector that belongs to a model among those in its folder. */
function pairProjector(models: ModelFiles[], projectors: string[]): void {
  for (const proj of projectors) {
    const dir = dirname(proj);
    const candidates = models.filter((m) => dirname(m.path) === dir && !m.mmproj);
    if (candidates.length === 0) continue;
    // With several models in one folder, the projector named after a model wins (mmproj-<model>).
    const key = stem(proj).toLowerCase().replace(/[-_.]?mmproj[-_.]?/g, "");
    const named = candidates
      .filter((m) => key.length > 0 && (key.includes(m.name.toLowerCase()) || m.name.toLowerCase().includes(key)))
      .sort((a, b) => b.name.length - a.name.length)[0];
    const chosen = named ?? (candidates.length === 1 ? candidates[0] : undefined);
    if (chosen) chosen.mmproj = proj;
  }
}

/** Groups relative `.gguf` paths into models. */
export function groupModelFiles(paths: readonly string[]): ModelFiles[] {
  const sorted = [...paths].filter((p) => /\.gguf$/i.test(p)).sort();
  const models: ModelFiles[] = [];
  const splits = new Map<string, { parts: Map<number, string>; total: number }>();
  const projectors: string[] = [];
  for (const p of sorted) {
    if (isProjector(p)) {
      projectors.push(p);
      continue;
    }
    const m = SHARD.exec(basename(p));
    if (!m) {
      models.push({ name: stem(p), path: p, files: [p], mmproj: undefined, missingShards: [] });
      continue;
    }
    const key = join(dirname(p), m[1]!);
    const entry = splits.get(key) ?? { parts: new Map(), total: Number(m[3]) };
    entry.parts.set(Number(m[2]), p);
    splits.set(key, entry);
  }
  for (const [key, { parts, total }] of splits) {
    const files = [...parts.entries()].sort((a, b) => a[0] - b[0]).map(([, f]) => f);
    const missing = Array.from({ length: total }, (_, i) => i + 1).filter((i) => !parts.has(i));
    const first = parts.get(1) ?? files[0]!;
    models.push({ name: basename(key), path: first, files, mmproj: undefined, missingShards: missing });
  }
  pairProjector(models, projectors);
  // Two folders with a model of the same name: qualify both with their folder.
  const counts = new Map<string, number>();
  for (const m of models) counts.set(m.name, (counts.get(m.name) ?? 0) + 1);
  for (const m of models) {
    const dir = dirname(m.path);
    if ((counts.get(m.name) ?? 0) > 1 && dir !== ".") m.name = `${dir}/${m.name}`;
  }
  return models.sort((a, b) => a.name.localeCompare(b.name));
}
