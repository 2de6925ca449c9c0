/**
 * The accelerators a llama.cpp build can use, from `llama-server --list-devices` (CPU is never
 * listed there). A CPU-only build on a GPU machine lists none, so this, not the hardware, says
 * whether models run on a GPU.
 */
import type { LlamaBinaries } from "./binaries.ts";

export interface LlamaDevice {
  /** e.g. `Vulkan0`, `CUDA0`, `RPC0`. */
  name: string;
  /** Lowercased backend: `vulkan`, `cuda`, `rocm`, `metal`, `rpc`, ... */
  backend: string;
  description: string;
  totalBytes: number;
  freeBytes: number;
}

const LINE = /^\s+([A-Za-z]+)(\d*): (.*) \((\d+) MiB, (\d+) MiB free\)\s*$/;

export function parseListDevices(output: string): LlamaDevice[] {
  const devices: LlamaDevice[] = [];
  for (const line of output.split("\n")) {
    const m = LINE.exec(line);
    if (!m) continue;
    devices.push({
      name: `${m[1]}${m[2]}`,
      backend: m[1]!.toLowerCase(),
      description: m[3]!,
      totalBytes: Number(m[4]) * 2 ** 20,
      freeBytes: Number(m[5]) * 2 ** 20,
    });
  }
  return devices;
}

export async function listDevices(bin: LlamaBinaries): Promise<LlamaDevice[]> {
  const proc = Bun.spawn([bin.llamaServer, "--list-devices"], { stdout: "pipe", stderr: "ignore", env: { ...process.env, GGML_NO_BACKTRACE: "1" } });
  const out = await new Response(proc.stdout).text();
  await proc.exited;
  return parseListDevices(out).filter((d) => d.backend !== "rpc");
}

/** Backends a load may ask for (`llamacpp_backend`): the build's accelerators, and the CPU. */
export function availableBackends(devices: readonly LlamaDevice[]): string[] {
  return [...new Set([...devices.map((d) => d.backend), "cpu"])];
}
