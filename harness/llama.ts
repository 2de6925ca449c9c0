/**
 * The real llama.cpp for tests: the directory `npm test` provides (MESH_LLAMA_DIR, else the dev
 * build in the cache), and a helper that runs `llama-server` on a model with one thread and a small
 * context, as tests on a 2-core machine must.
 */
import type { LlamaBinaries } from "../llama/binaries.ts";
import { requireLlamaBinaries } from "../llama/binaries.ts";
import { spawnChild, type Child } from "./children.ts";
import { freePort } from "../pool/free-port.ts";
import { waitFor } from "./wait.ts";

let cached: LlamaBinaries | undefined;

export function devLlama(): LlamaBinaries {
  const dir = process.env.MESH_LLAMA_DIR;
  if (!dir) throw new Error("MESH_LLAMA_DIR is not set: run the tests with `npm test`, which provides llama.cpp");
  cached ??= requireLlamaBinaries(dir, "MESH_LLAMA_DIR");
  return cached;
}

export const devLlamaDir = (): string => devLlama().dir;

export interface LlamaServer {
  child: Child;
  url: string;
  stop(): Promise<number | null>;
}

/** Starts llama-server on `model` and waits until /health says 200. */
export async function startLlamaServer(model: string, extraArgs: string[] = []): Promise<LlamaServer> {
  const port = freePort();
  const child = spawnChild("llama-server", [
    devLlama().llamaServer,
    "--model", model,
    "--host", "127.0.0.1",
    "--port", String(port),
    "--threads", "1",
    "--threads-batch", "1",
    "--ctx-size", "512",
    "--parallel", "1",
    ...extraArgs,
  ], { env: { GGML_NO_BACKTRACE: "1" } });
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitFor(
      async () => {
        if (child.proc.exitCode !== null) throw new Error(`llama-server exited ${child.proc.exitCode}:\n${child.output().slice(-3000)}`);
        return (await fetch(`${url}/health`)).status === 200;
      },
      { what: `llama-server on ${model} to become healthy`, timeoutMs: 60_000 },
    );
  } catch (err) {
    await child.stop(0);
    throw new Error(`${(err as Error).message}\n${child.output().slice(-3000)}`);
  }
  return { child, url, stop: () => child.stop() };
}
