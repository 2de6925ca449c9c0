/**
 * The llama.cpp this version of mesh expects. The source that ships inside the npm package
 * node-llama-cpp is the one we can build without the internet (dev machines, CI), so it is the
 * reference build: its RPC protocol is what a split group must share.
 */
export const LLAMA_SOURCE = {
  npmPackage: "node-llama-cpp",
  npmVersion: "3.22.1",
  /** Path of the llama.cpp git bundle inside the package tarball. */
  bundlePath: "package/llama/gitRelease.bundle",
  commit: "de3ff81",
  rpcProtocol: "7.0.0",
} as const;

/**
 * The upstream release of that same llama.cpp (node-llama-cpp records it in `llama/llama.cpp.info.json`):
 * what a first run downloads, and the cache key a source build of the bundle is kept under.
 */
export const LLAMA_RELEASE = "v0.5.0";

export function describeExpectedLlama(): string {
  return `llama.cpp ${LLAMA_SOURCE.commit} (from ${LLAMA_SOURCE.npmPackage}@${LLAMA_SOURCE.npmVersion}, RPC protocol ${LLAMA_SOURCE.rpcProtocol})`;
}
