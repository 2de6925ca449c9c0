/**
 * Builds llama-server and the RPC server from a llama.cpp source tree with cmake. Static binaries
 * with the RPC backend on, nothing that reaches for the internet at build time (the web UI is
 * left out). Used by the dev/CI script now and by `mesh llama build` later.
 */
import { mkdirSync } from "node:fs";

export type LlamaFlavor = "cpu" | "vulkan" | "rocm" | "metal" | "cuda";

/** cmake configure flags for a flavor: a pure decision, so it is tested as a table. */
export function cmakeConfigureArgs(flavor: LlamaFlavor, platform: NodeJS.Platform = process.platform): string[] {
  const common = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DGGML_RPC=ON",
    "-DGGML_NATIVE=OFF",
    "-DGGML_OPENMP=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
  ];
  // x86-64 CPUs from the last decade have these; a portable build without them is 2-4x slower.
  const x86 = ["-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON", "-DGGML_BMI2=ON"];
  const isX64 = process.arch === "x64";
  // Fully static linking works with glibc only for binaries that load no GPU driver.
  const staticLink = platform === "linux" ? ["-DGGML_STATIC=ON", "-DCMAKE_EXE_LINKER_FLAGS=-static"] : [];
  switch (flavor) {
    case "cpu":
      return [...common, ...(isX64 ? x86 : []), ...staticLink];
    case "vulkan":
      return [...common, ...(isX64 ? x86 : []), "-DGGML_VULKAN=ON"];
    case "rocm":
      return [...common, ...(isX64 ? x86 : []), "-DGGML_HIP=ON"];
    case "cuda":
      return [...common, ...(isX64 ? x86 : []), "-DGGML_CUDA=ON"];
    case "metal":
      return [...common, "-DGGML_METAL=ON", "-DGGML_METAL_EMBED_LIBRARY=ON"];
  }
}

export const BUILD_TARGETS = ["llama-server", "ggml-rpc-server"] as const;

export interface SourceBuildOptions {
  sourceDir: string;
  buildDir: string;
  flavor: LlamaFlavor;
  jobs: number;
  /** Where cmake's output goes; the build is minutes of text nobody reads unless it fails. */
  logFile: string;
}

async function run(argv: string[], logFile: string): Promise<void> {
  const log = Bun.file(logFile);
  const previous = (await log.exists()) ? await log.text() : "";
  const proc = Bun.spawn(argv, { stdout: "pipe", stderr: "pipe" });
  const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  await Bun.write(logFile, `${previous}$ ${argv.join(" ")}\n${out}${err}`);
  const code = await proc.exited;
  if (code !== 0) {
    const tail = `${out}${err}`.trim().split("\n").slice(-20).join("\n");
    throw new Error(`${argv.slice(0, 3).join(" ")} failed with exit ${code} (full log: ${logFile}):\n${tail}`);
  }
}

/** Configures and builds; resolves to the directory holding the executables. */
export async function buildFromSource(opts: SourceBuildOptions): Promise<string> {
  mkdirSync(opts.buildDir, { recursive: true });
  await run(["cmake", "-S", opts.sourceDir, "-B", opts.buildDir, ...cmakeConfigureArgs(opts.flavor)], opts.logFile);
  await run(
    ["cmake", "--build", opts.buildDir, "--config", "Release", "-j", String(opts.jobs), "--target", ...BUILD_TARGETS],
    opts.logFile,
  );
  return `${opts.buildDir}/bin`;
}
