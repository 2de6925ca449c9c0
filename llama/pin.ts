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

/** Cache key of binaries built from that source, `<build>-<flavor>` under the llama cache root. */
export const LLAMA_SOURCE_BUILD = `${LLAMA_SOURCE.npmPackage}-${LLAMA_SOURCE.npmVersion}`;

export function describeExpectedLlama(): string {
  return `llama.cpp ${LLAMA_SOURCE.commit} (from ${LLAMA_SOURCE.npmPackage}@${LLAMA_SOURCE.npmVersion}, RPC protocol ${LLAMA_SOURCE.rpcProtocol})`;
}
