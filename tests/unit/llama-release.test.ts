import { describe, expect, test } from "bun:test";
import { chooseAsset, type ReleaseAsset } from "../../llama/assets.ts";
import { sourceKind } from "../../llama/build.ts";
import { buildFlavor, releaseFlavor, type MachineProbe } from "../../llama/flavor.ts";
import { parseRelease } from "../../llama/release.ts";

const linux: MachineProbe = { platform: "linux", arch: "x64", nvidiaSmi: false, rocmSmi: false, vulkanLoader: false, nvcc: false };

describe("flavor", () => {
  test.each<[string, Partial<MachineProbe>, string, string]>([
    ["a CPU box", {}, "cpu", "cpu"],
    ["a Vulkan loader (Intel, AMD without ROCm)", { vulkanLoader: true }, "vulkan", "vulkan"],
    ["AMD with ROCm", { rocmSmi: true, vulkanLoader: true }, "rocm", "rocm"],
    ["NVIDIA on Linux: no CUDA archive upstream, so Vulkan", { nvidiaSmi: true, vulkanLoader: true }, "vulkan", "vulkan"],
    ["NVIDIA on Linux with nvcc: a source build uses CUDA", { nvidiaSmi: true, vulkanLoader: true, nvcc: true }, "vulkan", "cuda"],
    ["NVIDIA on Linux without a Vulkan loader", { nvidiaSmi: true }, "cpu", "cpu"],
    ["NVIDIA on Windows: the CUDA archive", { platform: "win32", nvidiaSmi: true }, "cuda", "cuda"],
    ["Apple Silicon", { platform: "darwin", arch: "arm64" }, "metal", "metal"],
    ["an Intel Mac", { platform: "darwin", arch: "x64" }, "cpu", "cpu"],
  ])("%s", (_, probe, release, build) => {
    expect(releaseFlavor({ ...linux, ...probe })).toBe(release as never);
    expect(buildFlavor({ ...linux, ...probe })).toBe(build as never);
  });
});

const asset = (name: string): ReleaseAsset => ({ name, url: `https://example.invalid/${name}`, size: 1, digest: undefined });
const ASSETS = [
  "cudart-llama-bin-win-cuda-12.4-x64.zip",
  "llama-b7000-bin-macos-arm64.tar.gz",
  "llama-b7000-bin-macos-x64.tar.gz",
  "llama-b7000-bin-ubuntu-arm64.tar.gz",
  "llama-b7000-bin-ubuntu-rocm-7.2-x64.tar.gz",
  "llama-b7000-bin-ubuntu-vulkan-x64.tar.gz",
  "llama-b7000-bin-ubuntu-x64.tar.gz",
  "llama-b7000-bin-win-cpu-x64.zip",
  "llama-b7000-bin-win-cuda-12.4-x64.zip",
  "llama-b7000-bin-win-cuda-13.1-x64.zip",
  "llama-b7000-bin-win-vulkan-x64.zip",
  "llama-b7000-xcframework.zip",
].map(asset);

describe("chooseAsset", () => {
  test.each<[NodeJS.Platform, string, string, string]>([
    ["linux", "x64", "cpu", "llama-b7000-bin-ubuntu-x64.tar.gz"],
    ["linux", "arm64", "cpu", "llama-b7000-bin-ubuntu-arm64.tar.gz"],
    ["linux", "x64", "vulkan", "llama-b7000-bin-ubuntu-vulkan-x64.tar.gz"],
    ["linux", "x64", "rocm", "llama-b7000-bin-ubuntu-rocm-7.2-x64.tar.gz"],
    ["darwin", "arm64", "metal", "llama-b7000-bin-macos-arm64.tar.gz"],
    ["darwin", "x64", "cpu", "llama-b7000-bin-macos-x64.tar.gz"],
    ["win32", "x64", "cpu", "llama-b7000-bin-win-cpu-x64.zip"],
    ["win32", "x64", "cuda", "llama-b7000-bin-win-cuda-13.1-x64.zip"],
    ["win32", "x64", "vulkan", "llama-b7000-bin-win-vulkan-x64.zip"],
  ])("%s %s %s", (platform, arch, flavor, name) => {
    expect(chooseAsset(ASSETS, "b7000", platform, arch, flavor as never)).toEqual({ asset: asset(name) });
  });
  test("an older release's .zip and a tag of the vX.Y.Z kind are matched alike", () => {
    expect(chooseAsset([asset("llama-v0.5.0-bin-ubuntu-x64.zip")], "v0.5.0", "linux", "x64", "cpu")).toEqual({ asset: asset("llama-v0.5.0-bin-ubuntu-x64.zip") });
  });
  test.each<[NodeJS.Platform, string, string, string]>([
    ["linux", "x64", "cuda", "publishes no Linux CUDA build: use --llama-flavor vulkan"],
    ["linux", "arm64", "vulkan", "has no vulkan build for linux-arm64 (its assets: llama-b7000-bin-macos-arm64"],
    ["freebsd", "x64", "cpu", "publishes no builds for freebsd"],
    ["linux", "riscv64", "cpu", "no llama.cpp release is built for the riscv64 architecture"],
    ["darwin", "arm64", "cuda", "no cuda build for macOS"],
  ])("no fit on %s %s %s: a clear error", (platform, arch, flavor, message) => {
    const got = chooseAsset(ASSETS, "b7000", platform, arch, flavor as never);
    expect("error" in got && got.error).toContain(message);
  });
});

describe("the releases API's answer", () => {
  test("assets with their digests and the source tarball", () => {
    const release = parseRelease({
      tag_name: "b7000",
      tarball_url: "https://api.example.invalid/tarball/b7000",
      assets: [
        { name: "a.tar.gz", browser_download_url: "https://example.invalid/a.tar.gz", size: 10, digest: "sha256:" + "ab".repeat(32), extra: 1 },
        { name: "b.zip", browser_download_url: "https://example.invalid/b.zip", size: 5, digest: null },
      ],
    });
    expect(release).toEqual({
      tag: "b7000",
      tarballUrl: "https://api.example.invalid/tarball/b7000",
      assets: [
        { name: "a.tar.gz", url: "https://example.invalid/a.tar.gz", size: 10, digest: "sha256:" + "ab".repeat(32) },
        { name: "b.zip", url: "https://example.invalid/b.zip", size: 5, digest: undefined },
      ],
    });
  });
  test("something that is not a release is refused with why", () => {
    expect(() => parseRelease({ message: "Not Found" })).toThrow("not a release");
  });
});

test.each<[string, boolean, string | undefined]>([
  ["/src/llama.cpp", true, "tree"],
  ["/x/gitRelease.bundle", false, "bundle"],
  ["/x/node-llama-cpp-3.22.1.tgz", false, "archive"],
  ["/x/llama.cpp-b7000.tar.gz", false, "archive"],
  ["/x/src.zip", false, "archive"],
  ["/x/readme.txt", false, undefined],
])("source kind of %s", (path, dir, kind) => expect(sourceKind(path, dir)).toBe(kind as never));
