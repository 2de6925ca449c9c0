/**
 * Models other tools keep, served in place by a real node whose HOME is a temporary folder laid out
 * as those tools lay it out: an Ollama manifest and blobs, an LM Studio folder, a Hugging Face cache
 * snapshot linking into its blobs, llama.cpp's cache, a MESH_MODEL_STORES folder. /v1/models lists
 * each with its store and quant, each answers a chat (loaded one at a time), a name the models dir
 * has already gets its suffix, `--scan-model-stores off` lists none of them, and no file of any
 * store is changed (bytes, mtime, links).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chat } from "../../harness/api.ts";
import { killAllChildren } from "../../harness/children.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA, startNode, type TestNode } from "../../harness/node.ts";
import { hfCacheRepo, ollamaModel, placeFile, treeSnapshot } from "../../harness/store-fixtures.ts";

let root: string;
let home: string;
let extra: string;
let tiny: string;
let storeDirs: string[];
let before: Record<string, Record<string, string>>;
const nodes: TestNode[] = [];

afterAll(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  await killAllChildren();
  if (root) rmSync(root, { recursive: true, force: true });
});

async function stop(node: TestNode): Promise<void> {
  nodes.splice(nodes.indexOf(node), 1);
  await node.stop();
}

const snapshot = () => Object.fromEntries(storeDirs.map((d) => [d, treeSnapshot(d)]));

/** What the node would otherwise take from the test's own environment: every store at its HOME default. */
function storeEnv(scan: "on" | "off"): Record<string, string | undefined> {
  const unset = ["HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "XDG_CACHE_HOME", "LLAMA_CACHE", "OLLAMA_MODELS"];
  return { ...Object.fromEntries(unset.map((k) => [k, undefined])), HOME: home, MESH_SCAN_MODEL_STORES: scan, MESH_MODEL_STORES: extra };
}

/** name -> [store, quant] as this node's /v1/models lists them. */
async function listed(node: TestNode): Promise<Record<string, [string, string | null]>> {
  const res = await fetch(`${node.url}/v1/models`);
  expect(res.status).toBe(200);
  const body = (await res.json()) as { data: { id: string; store: string; quant: string | null }[] };
  return Object.fromEntries(body.data.map((m) => [m.id, [m.store, m.quant]]));
}

const EXPECTED: Record<string, [string, string]> = {
  shared: ["models-dir", "Q8_0"],
  "shared@ollama": ["ollama", "Q8_0"],
  "tiny:q8": ["ollama", "Q8_0"],
  "hf.co/org/repo:Q8_0": ["ollama", "Q8_0"],
  "lms-tiny": ["lm-studio", "Q8_0"],
  "hf-tiny-Q8_0": ["huggingface", "Q8_0"],
  "org_repo_llama-tiny": ["llama.cpp", "Q8_0"],
  "extra-tiny": ["extra", "Q8_0"],
};

beforeAll(async () => {
  tiny = await testModel("tiny", "q8_0");
  root = mkdtempSync(join(tmpdir(), "mesh-e2e-stores-"));
  home = join(root, "home");
  extra = join(root, "extra");
  const ollama = join(home, ".ollama", "models");
  ollamaModel(ollama, { model: "shared", gguf: tiny });
  ollamaModel(ollama, { model: "tiny", tag: "q8", gguf: tiny });
  ollamaModel(ollama, { host: "hf.co", namespace: "org", model: "repo", tag: "Q8_0", gguf: tiny });
  placeFile(tiny, join(home, ".lmstudio", "models", "pub", "repo", "lms-tiny.gguf"));
  hfCacheRepo(join(home, ".cache", "huggingface", "hub"), "org/tiny-GGUF", "3".repeat(40), { "hf-tiny-Q8_0.gguf": tiny });
  placeFile(tiny, join(home, ".cache", "llama.cpp", "org_repo_llama-tiny.gguf"));
  placeFile(tiny, join(extra, "extra-tiny.gguf"));
  storeDirs = [ollama, join(home, ".lmstudio"), join(home, ".cache"), extra];
  before = snapshot();
});

test("every store's model is listed with its store and quant, and answers a chat", async () => {
  const node = await startNode([...SMALL_LLAMA, "--max-loaded-models", "1"], { env: storeEnv("on"), models: { "shared.gguf": tiny }, name: "stores-on" });
  nodes.push(node);
  expect(await listed(node)).toEqual(EXPECTED);

  // One model by name, through the Lemonade base URL too; its file is the one in the store.
  const one = async (name: string) => (await (await fetch(`${node.url}/api/v1/models/${name}`)).json()) as { id: string; store: string; quant: string; checkpoint: string };
  expect(await one("hf.co/org/repo:Q8_0")).toMatchObject({ id: "hf.co/org/repo:Q8_0", store: "ollama", quant: "Q8_0" });
  expect((await one("tiny:q8")).checkpoint).toStartWith(join(home, ".ollama", "models", "blobs", "sha256-"));
  expect((await one("hf-tiny-Q8_0")).checkpoint).toBe(join(home, ".cache", "huggingface", "hub", "models--org--tiny-GGUF", "snapshots", "3".repeat(40), "hf-tiny-Q8_0.gguf"));

  // One at a time: each load replaces the last (--max-loaded-models 1).
  for (const name of Object.keys(EXPECTED)) {
    const res = await chat(node, name);
    const body = await res.text();
    expect(`${name}: ${res.status}`).toBe(`${name}: 200`);
    expect((JSON.parse(body) as { choices: unknown[] }).choices).toHaveLength(1);
  }
  // Ollama's own name for a library model with the tag latest finds it.
  expect((await chat(node, "shared@ollama:latest")).status).toBe(200);
  await stop(node);
});

test("--scan-model-stores off: no store's model is listed", async () => {
  const node = await startNode(["--scan-model-stores", "off"], { env: storeEnv("on"), models: { "shared.gguf": tiny }, name: "stores-off" });
  nodes.push(node);
  expect(await listed(node)).toEqual({ shared: ["models-dir", "Q8_0"] });
  await stop(node);
});

test("no file of any store was changed: same bytes, same mtimes, no file added", () => {
  expect(snapshot()).toEqual(before);
});
