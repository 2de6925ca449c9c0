/**
 * Issue 27, children reachable around the node, performed as a web page or another local user
 * would: find a `llama-server` child's loopback port and ask it directly, past the node's API keys,
 * its browser guard and its media rule. A real node and a real llama-server; loopback only.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { CHILD_KEY_FILE } from "../../pool/child-key.ts";
import { chat, loaded, type LoadedServer } from "../../harness/api.ts";
import { killAllChildren } from "../../harness/children.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA, startNode, type TestNode } from "../../harness/node.ts";
import { waitFor } from "../../harness/wait.ts";

let n: TestNode;
let child: LoadedServer;
beforeAll(async () => {
  n = await startNode([...SMALL_LLAMA, "--model", "tiny"], { models: { "tiny.gguf": await testModel("tiny", "q8_0") } });
  child = await waitFor(async () => (await loaded(n)).find((s) => s.model_name === "tiny" && s.state === "ready"), { what: "tiny ready", timeoutMs: 60_000 });
});
afterAll(async () => {
  await n?.stop();
  await killAllChildren();
});

const PAGE = { origin: "http://evil.example", "content-type": "application/json" };

test.each([
  ["a page's chat completion", "POST", "/v1/chat/completions", JSON.stringify({ messages: [{ role: "user", content: "hi" }], max_tokens: 2 })],
  ["a completion on llama.cpp's own route", "POST", "/completion", JSON.stringify({ prompt: "hi", n_predict: 2 })],
  ["the model's path and settings", "GET", "/props", undefined],
  ["the model list", "GET", "/v1/models", undefined],
  ["the slots and their prompts", "GET", "/slots", undefined],
  ["tokenizing", "POST", "/tokenize", JSON.stringify({ content: "hi" })],
])("%s, asked of the child directly, is refused", async (_, method, path, body) => {
  const res = await fetch(`${child.backend_url}${path}`, { method, headers: PAGE, body });
  expect(res.status).toBe(401);
  const text = await res.text();
  expect(text).not.toContain(".gguf");
});

test("the node's own API still answers, and its key stays in a 0600 file, out of every argv", async () => {
  expect((await chat(n, "tiny", 2)).status).toBe(200);
  const keyFile = join(n.stateDir, CHILD_KEY_FILE);
  expect(statSync(keyFile).mode & 0o777).toBe(0o600);
  const key = readFileSync(keyFile, "utf8").trim();
  expect(key.length).toBeGreaterThanOrEqual(32);
  const argv = readFileSync(`/proc/${child.pid}/cmdline`, "utf8").split("\0");
  expect(argv).toContain("--api-key-file");
  expect(argv.join(" ")).not.toContain(key);
});
