import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { findLlamaBinaries, llamaCacheRoot, requireLlamaBinaries } from "../../llama/binaries.ts";
import { resolveLlamaBinaries } from "../../llama/resolve.ts";
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

describe("resolveLlamaBinaries: flag > MESH_LLAMA_DIR > cache", () => {
  const a = layout("res-a", { "llama-server": 0o755, "rpc-server": 0o755 });
  const b = layout("res-b", { "llama-server": 0o755, "rpc-server": 0o755 });
  const cacheHome = join(root, "xdg");
  test("the flag wins over the environment", () => {
    expect(resolveLlamaBinaries(a, { MESH_LLAMA_DIR: b }).dir).toBe(a);
  });
  test("the environment is used without a flag", () => {
    expect(resolveLlamaBinaries(undefined, { MESH_LLAMA_DIR: b }).dir).toBe(b);
  });
  test("nothing found says how to get binaries", () => {
    expect(() => resolveLlamaBinaries(undefined, { XDG_CACHE_HOME: cacheHome })).toThrow("pass --llama-dir DIR or set MESH_LLAMA_DIR");
  });
  test("the cache root follows XDG_CACHE_HOME", () => {
    expect(llamaCacheRoot({ XDG_CACHE_HOME: "/c" })).toBe("/c/mesh/llama.cpp");
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
