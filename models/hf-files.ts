/**
 * Which files of a Hugging Face repository make the model a reference asks for (pure): the
 * quant named in file names (case does not matter; Q4_K_M when none is named, else the smallest
 * file of at least Q4_0), every shard of a split GGUF, and the repository's multimodal projector
 * (`mmproj`) whose quant best matches the model's. Paths come from the Hub's tree listing, so
 * only safe relative `.gguf` paths are considered at all.
 */
import { basename, dirname } from "node:path";
import { PullError } from "./pull-error.ts";

/** A file as the Hub's tree lists it. */
export interface RepoFile {
  path: string;
  size: number;
  /** The LFS SHA-256 (hex); undefined for a file kept in git itself. */
  sha256: string | undefined;
  /** The git blob id (SHA-1 hex), which checks a file that is not in LFS. */
  gitOid: string | undefined;
}

export interface RepoSelection {
  /** The quant label of the chosen model (`Q4_K_M`), when its file names say one. */
  quant: string | undefined;
  /** The model's files, shards in order: the first is the one llama-server loads. */
  files: RepoFile[];
  mmproj: RepoFile | undefined;
}

/**
 * Quant labels from smallest to largest, a tier per entry (labels in one tier rank alike). The
 * order decides what "at least Q4" means and which projector matches a model best; among the
 * eligible files the tree's sizes decide.
 */
const QUANT_TIERS: readonly (readonly string[])[] = [
  ["IQ1_S"], ["IQ1_M"], ["TQ1_0"], ["IQ2_XXS"], ["IQ2_XS"], ["IQ2_S"], ["IQ2_M"], ["TQ2_0"], ["Q2_K_S"], ["Q2_K"], ["Q2_K_L", "Q2_K_XL"],
  ["IQ3_XXS"], ["IQ3_XS"], ["IQ3_S"], ["IQ3_M"], ["Q3_K_S"], ["Q3_K_M"], ["Q3_K_L"], ["Q3_K_XL"], ["IQ4_XS"], ["IQ4_NL"],
  ["Q4_0"], ["Q4_1"], ["MXFP4"], ["Q4_K_S"], ["Q4_K_M"], ["Q4_K_L"], ["Q4_K_XL"], ["Q5_0"], ["Q5_1"], ["Q5_K_S"], ["Q5_K_M"], ["Q5_K_L"], ["Q5_K_XL"],
  ["Q6_K"], ["Q6_K_L"], ["Q6_K_XL"], ["Q8_0"], ["Q8_K_XL"], ["F16", "BF16"], ["F32"],
];
const DEFAULT_QUANT = "Q4_K_M";
/** The least a default choice may be: below it a model loses too much to be a good first pick. */
const MIN_DEFAULT_QUANT = "Q4_0";

const RANK = new Map(QUANT_TIERS.flatMap((tier, i) => tier.map((label) => [label, i] as const)));
const ALIASES: Record<string, string> = { FP16: "F16", FP32: "F32" };

/** The rank of a quant label (Unsloth's `UD-` variants rank as the quant they vary), or undefined for one not in the order. */
export function quantRank(label: string): number | undefined {
  const upper = label.toUpperCase().replace(/^UD-/, "");
  return RANK.get(ALIASES[upper] ?? upper);
}

// A label stands between separators (`-`, `.`, `/` or the ends), never inside a word: `_` joins its parts.
const LABEL = /(?<=^|[-./])((?:UD-)?(?:[IT]?Q\d(?:_[A-Z0-9]+)*|MXFP4|BF16|FP16|FP32|F16|F32))(?=$|[-./])/gi;
const SHARD = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/i;

/** The quant label a file's name (or else its folder) states, uppercased, or undefined. */
export function quantOf(path: string): string | undefined {
  const last = (text: string) => [...text.matchAll(LABEL)].pop()?.[1]?.toUpperCase();
  const name = basename(path).replace(/\.gguf$/i, "").replace(/-\d{5}-of-\d{5}$/i, "");
  const label = last(name) ?? last(dirname(path));
  return label === undefined ? undefined : (ALIASES[label] ?? label);
}

/** Whether `quant` (as a user typed it) names the file at `path`: the label stands in it, any case, between separators. */
export function quantNames(quant: string, path: string): boolean {
  const escaped = quant.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return new RegExp(`(?<=^|[-./])${escaped}(?=$|[-./])`, "i").test(path.replace(/\.gguf$/i, ""));
}

// One segment of a path in a repository: no dot first (no `..`, nothing a scan skips), no separators, no control characters.
const SAFE_SEGMENT = /^[^./\\\x00-\x1f\x7f][^/\\\x00-\x1f\x7f]{0,254}$/;
const MAX_SEGMENTS = 8;

/** Whether a path from a repository (or a reference) may become a file path below a folder of ours. */
export function isSafeRepoPath(path: string): boolean {
  if (path.length === 0 || path.length > 1024) return false;
  const segments = path.split("/");
  return segments.length <= MAX_SEGMENTS && segments.every((s) => SAFE_SEGMENT.test(s));
}

export const isGgufPath = (path: string): boolean => /\.gguf$/i.test(path) && isSafeRepoPath(path);
const isProjector = (path: string) => /mmproj/i.test(basename(path));

/** A model among a repository's files: one file, or the shards of a split. */
interface ModelUnit {
  files: RepoFile[];
  label: string | undefined;
  size: number;
  missingShards: number[];
}

function modelUnits(files: readonly RepoFile[]): ModelUnit[] {
  const units: ModelUnit[] = [];
  const splits = new Map<string, { total: number; parts: Map<number, RepoFile> }>();
  for (const f of [...files].sort((a, b) => a.path.localeCompare(b.path))) {
    const m = SHARD.exec(f.path);
    if (!m) {
      units.push({ files: [f], label: quantOf(f.path), size: f.size, missingShards: [] });
      continue;
    }
    const key = `${m[1]}\0${m[3]}`;
    const split = splits.get(key) ?? { total: Number(m[3]), parts: new Map() };
    split.parts.set(Number(m[2]), f);
    splits.set(key, split);
  }
  for (const { total, parts } of splits.values()) {
    const shards = [...parts.entries()].sort((a, b) => a[0] - b[0]).map(([, f]) => f);
    const missingShards = Array.from({ length: total }, (_, i) => i + 1).filter((i) => !parts.has(i));
    units.push({ files: shards, label: quantOf(shards[0]!.path), size: shards.reduce((s, f) => s + f.size, 0), missingShards });
  }
  return units;
}

/** Labels first in quant order, then unranked ones; files with no label by name. */
function available(units: readonly ModelUnit[]): string {
  const labels = [...new Set(units.map((u) => u.label ?? u.files[0]!.path))];
  labels.sort((a, b) => (quantRank(a) ?? Infinity) - (quantRank(b) ?? Infinity) || a.localeCompare(b));
  return labels.join(", ");
}

const bySize = (a: ModelUnit, b: ModelUnit) => a.size - b.size || a.files[0]!.path.localeCompare(b.files[0]!.path);

function chooseUnit(repo: string, units: readonly ModelUnit[], want: { quant?: string; file?: string }): ModelUnit {
  if (want.file !== undefined) {
    const unit = units.find((u) => u.files.some((f) => f.path === want.file));
    if (!unit) throw new PullError("not_found", `${repo} has no file ${want.file}; its GGUF files: ${units.flatMap((u) => u.files.map((f) => f.path)).join(", ")}`);
    return unit;
  }
  if (want.quant !== undefined) {
    const quant = want.quant;
    const named = units.filter((u) => u.files.some((f) => quantNames(quant, f.path)));
    // `Q4_K_M` beside `UD-Q4_K_M`: the one whose label is exactly what was typed.
    const exact = named.filter((u) => u.label?.toUpperCase() === quant.toUpperCase());
    const pick = [...(exact.length > 0 ? exact : named)].sort(bySize)[0];
    if (!pick) throw new PullError("quant_not_found", `${repo} has no ${quant} file; quants there: ${available(units)} (pull one as ${repo}:QUANT)`);
    return pick;
  }
  const fallback = units.filter((u) => u.label === DEFAULT_QUANT).sort(bySize)[0];
  if (fallback) return fallback;
  const least = quantRank(MIN_DEFAULT_QUANT)!;
  const eligible = units.filter((u) => (u.label === undefined ? -1 : (quantRank(u.label) ?? -1)) >= least).sort(bySize);
  if (eligible[0]) return eligible[0];
  // A repository of one model in one file needs no quant to be named.
  if (units.length === 1) return units[0]!;
  throw new PullError(
    "quant_not_found",
    `${repo} has no ${DEFAULT_QUANT} file and none of at least ${MIN_DEFAULT_QUANT}; quants there: ${available(units)}; name one: ${repo}:QUANT`,
  );
}

/** The projector for a model: in its folder first; the same quant, else F16, BF16, F32, else the smallest. */
function chooseProjector(projectors: readonly RepoFile[], model: ModelUnit): RepoFile | undefined {
  const dir = dirname(model.files[0]!.path);
  const preference = (f: RepoFile) => {
    const label = quantOf(f.path);
    if (label !== undefined && label === model.label) return 0;
    const i = ["F16", "BF16", "F32"].indexOf(label ?? "");
    return i < 0 ? 4 : i + 1;
  };
  const key = (f: RepoFile) => [dirname(f.path) === dir ? 0 : 1, preference(f), f.size] as const;
  return [...projectors].sort((a, b) => {
    const [ka, kb] = [key(a), key(b)];
    return ka[0] - kb[0] || ka[1] - kb[1] || ka[2] - kb[2] || a.path.localeCompare(b.path);
  })[0];
}

/** The files to pull from `repo` for a quant or a file (neither: the default choice). */
export function selectRepoFiles(repo: string, entries: readonly RepoFile[], want: { quant?: string; file?: string }): RepoSelection {
  const gguf = entries.filter((e) => isGgufPath(e.path));
  const wantsProjector = want.file !== undefined && isProjector(want.file);
  const projectors = gguf.filter((e) => isProjector(e.path));
  const units = modelUnits(wantsProjector ? gguf : gguf.filter((e) => !isProjector(e.path)));
  if (units.length === 0) throw new PullError("not_found", `${repo} has no GGUF model files`);
  const unit = chooseUnit(repo, units, want);
  if (unit.missingShards.length > 0) {
    throw new PullError("not_found", `${repo} lists ${unit.files.length} of the shards of ${unit.files[0]!.path}; shard(s) ${unit.missingShards.join(", ")} are missing`);
  }
  return { quant: unit.label, files: unit.files, mmproj: wantsProjector ? undefined : chooseProjector(projectors, unit) };
}
