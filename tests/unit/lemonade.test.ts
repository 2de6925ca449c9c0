/** Lemonade parity's pure rules: which `/api/v1` paths are OpenAI's, `ctx_size`, the error shape, system-info. */
import { describe, expect, test } from "bun:test";
import type { LlamaDevice } from "../../llama/devices.ts";
import { lemonadeError, loadCtxSize } from "../../router/dialects/lemonade.ts";
import { isOpenAiRoute } from "../../router/dialects/openai-under-api.ts";
import { deviceKind, systemInfo, type HostFacts } from "../../router/dialects/system-info.ts";

describe("isOpenAiRoute: what /api/v1 answers with the /v1 routes", () => {
  test.each([
    ["GET", "/models", true],
    ["HEAD", "/models", true],
    ["GET", "/models/chat", true],
    ["GET", "/models/", false],
    ["POST", "/models", false],
    ["POST", "/chat/completions", true],
    ["POST", "/completions", true],
    ["POST", "/embeddings", true],
    ["POST", "/reranking", true],
    ["POST", "/responses", true],
    ["GET", "/chat/completions", false],
    ["GET", "/health", false],
    ["POST", "/load", false],
    ["POST", "/unload", false],
    ["GET", "/system-info", false],
    ["POST", "/constructor", false],
    ["POST", "/toString", false],
  ] as const)("%s %s: %p", (method, rest, yes) => expect(isOpenAiRoute(method, rest)).toBe(yes));
});

test.each([
  [undefined, undefined],
  [-1, 0],
  [0, 0],
  [4096, 4096],
] as const)("load ctx_size %p goes to the pool as %p", (given, pool) => expect(loadCtxSize(given)).toBe(pool));

test("a Lemonade error carries status and message, and OpenAI's error object beside them", () => {
  expect(lemonadeError("model x is not known", "not_found_error", "model_not_found")).toEqual({
    status: "error",
    message: "model x is not known",
    error: { message: "model x is not known", type: "not_found_error", code: "model_not_found" },
  });
});

const dev = (name: string, backend: string, description: string): LlamaDevice => ({ name, backend, description, totalBytes: 8 * 2 ** 30, freeBytes: 6 * 2 ** 30 });

test.each([
  [dev("CUDA0", "cuda", "NVIDIA H100"), "nvidia_gpu"],
  [dev("Vulkan0", "vulkan", "NVIDIA GeForce RTX 4090"), "nvidia_gpu"],
  [dev("ROCm0", "rocm", "gfx1100"), "amd_gpu"],
  [dev("Vulkan0", "vulkan", "AMD Radeon 890M Graphics (RADV GFX1150)"), "amd_gpu"],
  [dev("Metal", "metal", "Apple M2"), "gpu"],
  [dev("Vulkan0", "vulkan", "Intel(R) Arc(tm) A770"), "gpu"],
])("%p is %p", (d, kind) => expect(deviceKind(d)).toBe(kind));

describe("systemInfo", () => {
  const host: HostFacts = { os: "Linux-6.8.0", processor: "AMD EPYC", threads: 16, arch: "x64", totalMemBytes: 64 * 2 ** 30, freeMemBytes: 32 * 2 ** 30 };

  test("a CPU-only build: the CPU, the cpu backend", () => {
    expect(systemInfo({ host, devices: [], backends: ["cpu"] })).toEqual({
      "OS Version": "Linux-6.8.0",
      Processor: "AMD EPYC",
      "Physical Memory": "64.0 GB",
      memory: { total_bytes: 64 * 2 ** 30, free_bytes: 32 * 2 ** 30 },
      devices: { cpu: { name: "AMD EPYC", cores: 16, threads: 16, available: true, family: "x64" } },
      recipes: { llamacpp: { default_backend: "cpu", backends: { cpu: { devices: ["cpu"], state: "installed", message: "", action: "" } } } },
    });
  });

  test("a CUDA build: its GPUs under nvidia_gpu, cuda the default backend", () => {
    const info = systemInfo({ host, devices: [dev("CUDA0", "cuda", "NVIDIA H100"), dev("CUDA1", "cuda", "NVIDIA H100")], backends: ["cuda", "cpu"] });
    expect(info.devices).toMatchObject({
      nvidia_gpu: [
        { name: "NVIDIA H100", vram_gb: 8, free_vram_gb: 6, available: true, family: "cuda", llama_device: "CUDA0" },
        { llama_device: "CUDA1" },
      ],
    });
    expect(info.recipes.llamacpp.default_backend).toBe("cuda");
    expect(info.recipes.llamacpp.backends).toMatchObject({ cuda: { devices: ["nvidia_gpu"], state: "installed" }, cpu: { devices: ["cpu"] } });
  });
});
