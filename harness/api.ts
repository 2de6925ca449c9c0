/** Small clients of a test node's API, so e2e tests read as what they check. */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { CHILD_KEY_FILE } from "../pool/child-key.ts";
import type { TestNode } from "./node.ts";
import { waitFor } from "./wait.ts";

export interface LoadedServer {
  model_name: string;
  type: string;
  pinned: boolean;
  is_busy: boolean;
  state: string;
  pid: number;
  backend_url: string;
  last_use: number;
}

export async function loaded(node: TestNode): Promise<LoadedServer[]> {
  const res = await fetch(`${node.url}/api/v1/health`);
  return ((await res.json()) as { all_models_loaded: LoadedServer[] }).all_models_loaded;
}

export const loadedNames = async (node: TestNode) => (await loaded(node)).map((s) => s.model_name).sort();

/**
 * A loaded model's own llama-server `/props`, asked with the node's key from its state dir (the
 * test is the node's user): nothing else reaches a child.
 */
export async function childProps(node: TestNode, s: LoadedServer): Promise<{ default_generation_settings: { n_ctx: number } }> {
  const key = readFileSync(join(node.stateDir, CHILD_KEY_FILE), "utf8").trim();
  const res = await fetch(`${s.backend_url}/props`, { headers: { authorization: `Bearer ${key}` } });
  if (res.status !== 200) throw new Error(`${s.backend_url}/props: ${res.status}`);
  return (await res.json()) as { default_generation_settings: { n_ctx: number } };
}

export async function server(node: TestNode, model: string): Promise<LoadedServer> {
  return waitFor(async () => (await loaded(node)).find((s) => s.model_name === model), { what: `${model} to be loaded` });
}

/** A JSON POST, as OpenAI and Lemonade clients send it (management routes refuse other types). */
export function post(node: TestNode, path: string, body: unknown, init: RequestInit = {}): Promise<Response> {
  return fetch(`${node.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: typeof body === "string" ? body : JSON.stringify(body), ...init });
}

export const chat = (node: TestNode, model: string, maxTokens = 2) =>
  post(node, "/v1/chat/completions", { model, messages: [{ role: "user", content: "hello" }], max_tokens: maxTokens });

export const embed = (node: TestNode, model: string) => post(node, "/v1/embeddings", { model, input: "hello world" });

/** A streaming chat of exactly `maxTokens` tokens (end-of-text ignored). */
export function startStream(node: TestNode, model: string, maxTokens: number, signal?: AbortSignal, headers: Record<string, string> = {}): Promise<Response> {
  const body = { model, messages: [{ role: "user", content: "hello" }], max_tokens: maxTokens, ignore_eos: true, stream: true };
  return post(node, "/v1/chat/completions", body, { signal, headers: { "content-type": "application/json", ...headers } });
}

/** A streaming chat whose first chunk has arrived. */
export async function openStream(node: TestNode, model: string, maxTokens: number, signal?: AbortSignal, headers: Record<string, string> = {}) {
  const res = await startStream(node, model, maxTokens, signal, headers);
  if (res.status !== 200) throw new Error(`stream for ${model}: ${res.status} ${await res.text()}`);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  const first = await reader.read();
  text += decoder.decode(first.value);
  return {
    reader,
    /** Reads to the end; resolves with the whole stream's text. */
    async rest(): Promise<string> {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return text;
        text += decoder.decode(value, { stream: true });
      }
    },
  };
}
