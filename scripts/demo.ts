#!/usr/bin/env bun
/**
 * `npm run demo`: a node (on http://127.0.0.1:9337 by default) serving a small random-weight demo
 * model, with everything it needs (llama.cpp binaries, the model, a state dir) set up on the first
 * run. The model babbles (its weights are random) but it is a real model served by the real
 * llama.cpp. Extra arguments go to `mesh` (e.g. `npm run demo -- --port 9400`).
 */
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { apiUrlIn } from "./api-address.ts";
import { provideDevLlama } from "./llama-dev.ts";
import { makeTestModel } from "./make-test-model.ts";

const root = join(import.meta.dir, "..");
const demo = join(root, ".demo");
const modelsDir = join(demo, "models");
const model = join(modelsDir, "mesh-demo.gguf");

const llama = await provideDevLlama();
if (!existsSync(model)) {
  mkdirSync(modelsDir, { recursive: true });
  await makeTestModel({ preset: "tiny", type: "q8_0", out: model });
}
console.error(`demo model: ${model}`);
const proc = Bun.spawn(
  [process.execPath, join(root, "main.ts"), "--state-dir", join(demo, "state"), "--models-dir", modelsDir, "--model", "mesh-demo", ...process.argv.slice(2)],
  { stdio: ["inherit", "inherit", "pipe"], env: { ...process.env, MESH_LLAMA_DIR: llama.dir } },
);
// The node handles SIGINT/SIGTERM itself; the demo only waits for it to finish.
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => proc.kill(signal));

// The node's log passes through as it is; the hint follows the line that says where the API really
// listens (`--port`, `--listen` and a config file move it).
const decoder = new TextDecoder();
let before = "";
let hinted = false;
for await (const chunk of proc.stderr) {
  process.stderr.write(chunk);
  if (hinted) continue;
  before += decoder.decode(chunk, { stream: true });
  const url = apiUrlIn(before);
  if (url) {
    hinted = true;
    process.stderr.write(`try:  curl ${url}/health\n`);
  }
}
process.exit(await proc.exited);
