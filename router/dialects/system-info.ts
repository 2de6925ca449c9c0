/**
 * `GET /api/v1/system-info` in Lemonade's shape: the host (OS, processor, memory), its devices as
 * the llama.cpp build sees them, and the `llamacpp` recipe's backends. `systemInfo` builds the
 * answer from plain facts (pure); `hostFacts` reads them from the OS. Lemonade's Windows-only
 * fields (OEM, BIOS, clock, power plan) and its other recipes do not apply here and are left out;
 * `memory` (bytes, total and free) is ours, beside Lemonade's "Physical Memory" text.
 */
import { cpus, freemem, release, totalmem, type as osType } from "node:os";
import type { LlamaDevice } from "../../llama/devices.ts";

export interface HostFacts {
  os: string;
  processor: string;
  threads: number;
  arch: string;
  totalMemBytes: number;
  freeMemBytes: number;
}

export interface SystemInfoInput {
  host: HostFacts;
  /** The build's accelerators (`llama-server --list-devices`). */
  devices: readonly LlamaDevice[];
  /** `llamacpp_backend` values a load may ask for. */
  backends: readonly string[];
}

/** Lemonade's device kinds: `nvidia_gpu`, `amd_gpu`; others (Metal, Intel, ...) are `gpu`. */
export function deviceKind(d: Pick<LlamaDevice, "backend" | "description">): string {
  if (d.backend === "cuda" || /nvidia|geforce|quadro|tesla|\brtx\b/i.test(d.description)) return "nvidia_gpu";
  if (d.backend === "rocm" || d.backend === "hip" || /\bamd\b|radeon|instinct/i.test(d.description)) return "amd_gpu";
  return "gpu";
}

const GIB = 2 ** 30;
const round2 = (n: number) => Math.round(n * 100) / 100;

export function systemInfo(input: SystemInfoInput) {
  const { host } = input;
  const gpus: Record<string, object[]> = {};
  for (const d of input.devices) {
    (gpus[deviceKind(d)] ??= []).push({
      name: d.description,
      vram_gb: round2(d.totalBytes / GIB),
      available: true,
      family: d.backend,
      llama_device: d.name,
      free_vram_gb: round2(d.freeBytes / GIB),
    });
  }
  const devicesOf = (backend: string) =>
    backend === "cpu" ? ["cpu"] : [...new Set(input.devices.filter((d) => d.backend === backend).map(deviceKind))];
  // The build's accelerator when it has one: that is what a load without llamacpp_backend gets.
  const defaultBackend = input.backends.find((b) => b !== "cpu") ?? "cpu";
  return {
    "OS Version": host.os,
    Processor: host.processor,
    "Physical Memory": `${(host.totalMemBytes / GIB).toFixed(1)} GB`,
    memory: { total_bytes: host.totalMemBytes, free_bytes: host.freeMemBytes },
    devices: {
      // os.cpus() counts logical processors; physical cores are not known here.
      cpu: { name: host.processor, cores: host.threads, threads: host.threads, available: true, family: host.arch },
      ...gpus,
    },
    recipes: {
      llamacpp: {
        default_backend: defaultBackend,
        backends: Object.fromEntries(input.backends.map((b) => [b, { devices: devicesOf(b), state: "installed", message: "", action: "" }])),
      },
    },
  };
}

export function hostFacts(): HostFacts {
  const cpu = cpus();
  return {
    os: `${osType()}-${release()}`,
    processor: cpu[0]?.model.trim() || "unknown",
    threads: cpu.length,
    arch: process.arch,
    totalMemBytes: totalmem(),
    freeMemBytes: freemem(),
  };
}
