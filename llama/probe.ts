/** What the flavor decision needs to know about this machine: a few executables and one library. */
import { existsSync } from "node:fs";
import type { MachineProbe } from "./flavor.ts";

const VULKAN_LOADERS = [
  "/usr/lib/x86_64-linux-gnu/libvulkan.so.1",
  "/usr/lib/aarch64-linux-gnu/libvulkan.so.1",
  "/usr/lib64/libvulkan.so.1",
  "/usr/lib/libvulkan.so.1",
  "C:\\Windows\\System32\\vulkan-1.dll",
];

export function probeMachine(): MachineProbe {
  return {
    platform: process.platform,
    arch: process.arch,
    nvidiaSmi: Bun.which("nvidia-smi") !== null,
    rocmSmi: Bun.which("rocm-smi") !== null,
    vulkanLoader: VULKAN_LOADERS.some((p) => existsSync(p)),
    nvcc: Bun.which("nvcc") !== null || existsSync("/usr/local/cuda/bin/nvcc"),
  };
}
