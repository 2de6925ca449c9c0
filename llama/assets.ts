/**
 * Which asset of a llama.cpp release holds the build for this platform and flavor (pure). Names
 * look like `llama-<tag>-bin-ubuntu-vulkan-x64.tar.gz`; only the part after `-bin-` is matched,
 * so a release tagged either `bNNNN` or `vX.Y.Z` works. Linux and macOS ship `.tar.gz` (older
 * releases `.zip`), Windows `.zip`.
 */
import type { LlamaFlavor } from "./source-build.ts";

export interface ReleaseAsset {
  name: string;
  url: string;
  size: number;
  /** `sha256:<hex>` from the releases API, when it gives one. */
  digest: string | undefined;
}

export type AssetChoice = { asset: ReleaseAsset } | { error: string };

const ARCHIVE = String.raw`\.(?:tar\.gz|zip)$`;

/** The `-bin-...` suffixes that fit, best first (a pattern each). */
export function assetPatterns(platform: NodeJS.Platform, arch: string, flavor: LlamaFlavor): RegExp[] | string {
  const a = arch === "arm64" ? "arm64" : arch === "x64" ? "x64" : undefined;
  if (!a) return `no llama.cpp release is built for the ${arch} architecture`;
  const p = (s: string) => new RegExp(`-bin-${s}${ARCHIVE}`);
  switch (platform) {
    case "linux":
      if (flavor === "cpu") return [p(`ubuntu-${a}`)];
      if (flavor === "vulkan") return [p(`ubuntu-vulkan-${a}`)];
      if (flavor === "rocm") return [p(String.raw`ubuntu-rocm-[\d.]+-${a}`), p(`ubuntu-rocm-${a}`)];
      if (flavor === "cuda") return "llama.cpp publishes no Linux CUDA build: use --llama-flavor vulkan (it runs on the NVIDIA driver) or build one with `mesh llama build --flavor cuda`";
      return `llama.cpp has no ${flavor} build for Linux`;
    case "darwin":
      if (flavor === "metal" || flavor === "cpu") return [p(`macos-${a}`)];
      return `llama.cpp has no ${flavor} build for macOS (use metal or cpu)`;
    case "win32":
      if (flavor === "cpu") return [p(`win-cpu-${a}`)];
      if (flavor === "vulkan") return [p(`win-vulkan-${a}`)];
      if (flavor === "cuda") return [p(String.raw`win-cuda-[\d.]+-${a}`)];
      if (flavor === "rocm") return [p(`win-hip-[\\w.-]*${a}`)];
      return `llama.cpp has no ${flavor} build for Windows`;
    default:
      return `llama.cpp publishes no builds for ${platform}`;
  }
}

/** A CUDA or ROCm version inside an asset name, for picking the newest. */
const versionOf = (name: string) => (/-(?:cuda|rocm)-([\d.]+)-/.exec(name)?.[1] ?? "0").split(".").map(Number);
const newerFirst = (a: ReleaseAsset, b: ReleaseAsset) => {
  const [x, y] = [versionOf(a.name), versionOf(b.name)];
  for (let i = 0; i < Math.max(x.length, y.length); i++) if ((x[i] ?? 0) !== (y[i] ?? 0)) return (y[i] ?? 0) - (x[i] ?? 0);
  return a.name.localeCompare(b.name);
};

export function chooseAsset(assets: readonly ReleaseAsset[], tag: string, platform: NodeJS.Platform, arch: string, flavor: LlamaFlavor): AssetChoice {
  const patterns = assetPatterns(platform, arch, flavor);
  if (typeof patterns === "string") return { error: patterns };
  // The cudart-* runtime archives match no `llama-...-bin-` name, so they are never chosen.
  const llama = assets.filter((x) => x.name.startsWith("llama-"));
  for (const pattern of patterns) {
    const hits = llama.filter((x) => pattern.test(x.name)).sort(newerFirst);
    if (hits[0]) return { asset: hits[0] };
  }
  return { error: `llama.cpp release ${tag} has no ${flavor} build for ${platform}-${arch} (its assets: ${llama.map((x) => x.name).join(", ") || "none"})` };
}
