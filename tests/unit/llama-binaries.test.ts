import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { findLlamaBinaries, llamaCacheRoot, requireLlamaBinaries } from "../../llama/binaries.ts";
import { cacheCandidates, findLlama } from "../../llama/resolve.ts";
import type { MachineProbe } from "../../llama/flavor.ts";
import { cmakeConfigureArgs } from "../../llama/source-build.ts";

const root = mkdtempSync(join(tmpdir(), "mesh-llama-bin-test-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

function layout(name: string, files: Record<string, number>): string {
  const dir = join(root, name);
  for (const [file, mode] of Object.entries(files)) {
    mkdirSync(join(dir, file, ".."), { recursive: true });
    writeFileSync(join(dir, file), "#!/bin/sh\n");
    chmodSync(join(dir, file), mode);
  }
  mkdirSync(dir, { recursive: true });
  return dir;
}

describe("findLlamaBinaries", () => {
  const cases: [string, Record<string, number>, { dir: string; rpc: string } | null][] = [
    ["flat, rpc-server", { "llama-server": 0o755, "rpc-server": 0o755 }, { dir: "", rpc: "rpc-server" }],
    ["flat, ggml-rpc-server", { "llama-server": 0o755, "ggml-rpc-server": 0o755 }, { dir: "", rpc: "ggml-rpc-server" }],
    ["archive bin/", { "bin/llama-server": 0o755, "bin/rpc-server": 0o755 }, { dir: "bin", rpc: "rpc-server" }],
    ["build tree", { "build/bin/llama-server": 0o755, "build/bin/ggml-rpc-server": 0o755 }, { dir: "build/bin", rpc: "ggml-rpc-server" }],
    ["no rpc server", { "llama-server": 0o755 }, null],
    ["not executable", { "llama-server": 0o644, "rpc-server": 0o755 }, null],
    ["split across dirs", { "llama-server": 0o755, "bin/rpc-server": 0o755 }, null],
    ["empty", {}, null],
  ];
  test.each(cases)("%s", (name, files, expected) => {
    const dir = layout(name.replace(/\W+/g, "-"), files);
    const found = findLlamaBinaries(dir);
    if (!expected) return expect(found).toBeNull();
    const base = join(dir, expected.dir);
    expect(found).toEqual({ dir: base, llamaServer: join(base, "llama-server"), rpcServer: join(base, expected.rpc) });
  });

  test("a directory without binaries is refused with what to do", () => {
    expect(() => requireLlamaBinaries(join(root, "missing"), "--llama-dir")).toThrow("--llama-dir");
    const empty = layout("empty-dir", {});
    expect(() => requireLlamaBinaries(empty, "MESH_LLAMA_DIR")).toThrow("holds no llama-server with rpc-server");
  });
});

describe("findLlama: flag > MESH_LLAMA_DIR > cache", () => {
  const a = layout("res-a", { "llama-server": 0o755, "rpc-server": 0o755 });
  const b = layout("res-b", { "llama-server": 0o755, "rpc-server": 0o755 });
  const cacheHome = join(root, "xdg");
  const cpu: MachineProbe = { platform: "linux", arch: "x64", nvidiaSmi: false, rocmSmi: false, vulkanLoader: false, nvcc: false };
  const choice = (llamaDir?: string) => ({ llamaDir, llamaRelease: "b1", llamaFlavor: undefined, llamaMirror: "http://127.0.0.1:1" });
  test("the flag wins over the environment", () => {
    expect(findLlama(choice(a), { MESH_LLAMA_DIR: b }, cpu)?.dir).toBe(a);
  });
  test("the environment is used without a flag", () => {
    expect(findLlama(choice(), { MESH_LLAMA_DIR: b }, cpu)?.dir).toBe(b);
  });
  test("nothing there: undefined (the node then downloads)", () => {
    expect(findLlama(choice(), { XDG_CACHE_HOME: cacheHome }, cpu)).toBeUndefined();
  });
  test("a cached build of the release for this machine's flavor is found", () => {
    const dir = join(cacheHome, "mesh", "llama.cpp", "b1-cpu");
    mkdirSync(dir, { recursive: true });
    for (const f of ["llama-server", "ggml-rpc-server"]) writeFileSync(join(dir, f), "", { mode: 0o755 });
    expect(findLlama(choice(), { XDG_CACHE_HOME: cacheHome }, cpu)?.dir).toBe(dir);
  });
  test("the cache root follows XDG_CACHE_HOME", () => {
    expect(llamaCacheRoot({ XDG_CACHE_HOME: "/c" })).toBe("/c/mesh/llama.cpp");
  });
  test.each<[string, Partial<MachineProbe>, string[]]>([
    ["a CPU box", {}, ["cpu"]],
    ["NVIDIA with nvcc: a CUDA build made here, else the Vulkan release", { nvidiaSmi: true, nvcc: true, vulkanLoader: true }, ["cuda", "vulkan"]],
    ["NVIDIA without nvcc", { nvidiaSmi: true, vulkanLoader: true }, ["vulkan"]],
  ])("cache candidates: %s", (_, probe, flavors) => {
    expect(cacheCandidates({ llamaFlavor: undefined }, { ...cpu, ...probe })).toEqual(flavors as never);
    expect(cacheCandidates({ llamaFlavor: "rocm" }, { ...cpu, ...probe })).toEqual(["rocm"]);
  });
});

describe("cmakeConfigureArgs", () => {
  const cases: [Parameters<typeof cmakeConfigureArgs>[0], NodeJS.Platform, string[], string[]][] = [
    ["cpu", "linux", ["-DGGML_RPC=ON", "-DLLAMA_USE_PREBUILT_UI=OFF", "-DGGML_STATIC=ON"], ["-DGGML_VULKAN=ON"]],
    ["vulkan", "linux", ["-DGGML_RPC=ON", "-DGGML_VULKAN=ON"], ["-DGGML_STATIC=ON"]],
    ["cuda", "linux", ["-DGGML_CUDA=ON"], ["-DGGML_STATIC=ON"]],
    ["rocm", "linux", ["-DGGML_HIP=ON"], []],
    ["metal", "darwin", ["-DGGML_METAL=ON"], ["-DGGML_STATIC=ON", "-DGGML_AVX2=ON"]],
    ["cpu", "darwin", ["-DGGML_RPC=ON"], ["-DGGML_STATIC=ON"]],
  ];
  test.each(cases)("%s on %s", (flavor, platform, has, hasNot) => {
    const args = cmakeConfigureArgs(flavor, platform);
    for (const a of has) expect(args).toContain(a);
    for (const a of hasNot) expect(args).not.toContain(a);
    expect(args).toContain("-DLLAMA_BUILD_UI=OFF");
  });
});
