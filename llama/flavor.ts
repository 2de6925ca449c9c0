/**
 * Which llama.cpp build suits this machine (pure, from probes the shell gathers): NVIDIA (the
 * driver's nvidia-smi), AMD (rocm-smi), a Vulkan loader, Apple Silicon, else the CPU. `--llama-flavor`
 * overrides. For building from source, CUDA is chosen only where its compiler (nvcc) is present.
 */
import type { LlamaFlavor } from "./source-build.ts";

export const FLAVORS = ["cpu", "vulkan", "rocm", "metal", "cuda"] as const satisfies readonly LlamaFlavor[];

export interface MachineProbe {
  platform: NodeJS.Platform;
  arch: string;
  nvidiaSmi: boolean;
  rocmSmi: boolean;
  vulkanLoader: boolean;
  nvcc: boolean;
}

/** The flavor of a release archive to download. */
export function releaseFlavor(p: MachineProbe): LlamaFlavor {
  if (p.platform === "darwin") return p.arch === "arm64" ? "metal" : "cpu";
  // NVIDIA: Windows has CUDA archives; Linux has none upstream, and its Vulkan build runs on the driver.
  if (p.nvidiaSmi) return p.platform === "win32" ? "cuda" : p.vulkanLoader ? "vulkan" : "cpu";
  if (p.rocmSmi && p.platform === "linux") return "rocm";
  if (p.vulkanLoader) return "vulkan";
  return "cpu";
}

/** The flavor to build from source: like a download, but CUDA wherever nvcc can build it. */
export function buildFlavor(p: MachineProbe): LlamaFlavor {
  if (p.nvidiaSmi && p.nvcc) return "cuda";
  return releaseFlavor(p);
}
