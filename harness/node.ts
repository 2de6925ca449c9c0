/**
 * Starts a real mesh node for end-to-end tests: `bun main.ts`, or the compiled binary when
 * MESH_TEST_BINARY names one, with a temporary state dir and models dir, the API on a free port
 * (`--port 0`, read back from the log), QUIC on loopback and relays off.
 */
import { DEFAULT_LINE, TRANSPORT_LINES, type TransportLine } from "../mesh/transport.ts";
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawnChild, type Child } from "./children.ts";
import { devLlamaDir } from "./llama.ts";

const REPO = join(import.meta.dir, "..");

export interface TestNode {
  child: Child;
  url: string;
  port: number;
  stateDir: string;
  modelsDir: string;
  /** SIGTERM and wait; removes the temporary dirs. Resolves with the exit code. */
  stop(): Promise<number | null>;
}

/** argv that runs the mesh CLI under test. */
export function meshCommand(): string[] {
  const binary = process.env.MESH_TEST_BINARY;
  return binary ? [binary] : [process.execPath, join(REPO, "main.ts")];
}

export interface StartNodeOptions {
  env?: Record<string, string | undefined>;
  name?: string;
  /** argv of the mesh CLI, instead of `meshCommand()`. */
  command?: string[];
  cwd?: string;
  /** Files copied into the models dir before the node starts, by file name (e.g. `{ "a.gguf": path }`). */
  models?: Record<string, string>;
  /** Files written into the state dir before the node starts, by name (e.g. `{ "config.toml": text }`). */
  stateFiles?: Record<string, string>;
  /** The state dir of a node killed before, to start it again as itself (removed when this one stops). */
  stateDir?: string;
  /** `--relay` values instead of `disabled` (none: the node decides, e.g. from its join token). */
  relay?: string[];
  /** Leave out the suite's `--transport` (TRANSPORT_ARGS): the node decides its line, as a user's would. */
  ownLine?: boolean;
}

/**
 * The iroh line the mesh suites run on: `MESH_TEST_TRANSPORT=iroh035` runs them again on the 0.35
 * line, the compatibility matrix (`npm test` does both); unset, the default line.
 */
export const TEST_TRANSPORT: TransportLine | undefined = testTransport(process.env.MESH_TEST_TRANSPORT);
/** The line the suite's nodes run. */
export const TEST_LINE: TransportLine = TEST_TRANSPORT ?? DEFAULT_LINE;

function testTransport(text: string | undefined): TransportLine | undefined {
  if (!text) return undefined;
  // A misspelt line must not pass as a run on the default one.
  if (!(TRANSPORT_LINES as readonly string[]).includes(text)) throw new Error(`MESH_TEST_TRANSPORT="${text}": expected one of ${TRANSPORT_LINES.join(", ")}`);
  return text as TransportLine;
}
/** `--transport` for a node a test starts by hand, on the line the suite runs on. */
export const TRANSPORT_ARGS: string[] = TEST_TRANSPORT ? ["--transport", TEST_TRANSPORT] : [];

/** What e2e nodes give every llama-server on a 2-core machine: one thread, one slot, small context. */
export const SMALL_LLAMA = ["--ctx-size", "512", "--llamacpp-args", "--threads 1 --threads-batch 1 --parallel 1", "--rpc-threads", "1"];

export async function startNode(args: string[] = [], opts: StartNodeOptions = {}): Promise<TestNode> {
  const stateDir = opts.stateDir ?? mkdtempSync(join(tmpdir(), "mesh-test-state-"));
  const modelsDir = mkdtempSync(join(tmpdir(), "mesh-test-models-"));
  for (const [file, source] of Object.entries(opts.models ?? {})) copyFileSync(source, join(modelsDir, file));
  for (const [file, text] of Object.entries(opts.stateFiles ?? {})) writeFileSync(join(stateDir, file), text);
  const argv = [
    ...(opts.command ?? meshCommand()),
    "--port", "0",
    "--state-dir", stateDir,
    "--models-dir", modelsDir,
    "--quic-bind", "127.0.0.1:0",
    ...(opts.relay ?? ["disabled"]).flatMap((r) => ["--relay", r]),
    ...(opts.ownLine ? [] : TRANSPORT_ARGS),
    ...args,
  ];
  // The developer's own Ollama, LM Studio and Hugging Face models stay out of tests that did not ask for them.
  const env = { MESH_LLAMA_DIR: devLlamaDir(), MESH_SCAN_MODEL_STORES: "off", ...opts.env };
  const child = spawnChild(opts.name ?? "mesh", argv, { env, cwd: opts.cwd });
  const cleanup = () => {
    rmSync(stateDir, { recursive: true, force: true });
    rmSync(modelsDir, { recursive: true, force: true });
  };
  try {
    const m = await child.waitForOutput(/listening on (http:\/\/[^\s]+:(\d+))/, 60_000);
    const stop = async () => {
      const code = await child.stop();
      cleanup();
      return code;
    };
    return { child, url: m[1]!, port: Number(m[2]), stateDir, modelsDir, stop };
  } catch (err) {
    await child.stop(0);
    cleanup();
    throw err;
  }
}
