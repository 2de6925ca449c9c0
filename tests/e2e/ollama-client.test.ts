/**
 * The Ollama API with the real `ollama` npm client against real nodes: list, ps, show, chat
 * streamed and whole, generate, embed, keep_alive 0, Ollama-shaped errors; then across two nodes,
 * the model only on the other one (the request crosses the mesh as `/v1`; `/api/ps` and `/api/show`
 * tell of the host's model, and `keep_alive: 0` unloads it on the host); 405 with Allow on its
 * routes; its requests counted in the metrics under its routes; keep_alive as a model's own idle unload;
 * `--ollama-listen`, a second listener with the same keys and its own browser guard.
 */
import { afterAll, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Ollama } from "ollama";
import { loaded } from "../../harness/api.ts";
import { killAllChildren, spawnChild } from "../../harness/children.ts";
import { devLlamaDir } from "../../harness/llama.ts";
import { hostAndEntry, startMeshNode, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { meshCommand, SMALL_LLAMA, startNode, type TestNode } from "../../harness/node.ts";
import { observationsOf, parseScrape, valueOf } from "../../harness/prometheus.ts";
import { waitFor } from "../../harness/wait.ts";

const nodes: (MeshTestNode | TestNode)[] = [];
afterAll(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  await killAllChildren();
});

const TINY = "tiny-q8_0";
const EMBED = "embed";

test("one node: the Ollama client lists, shows, chats, generates and embeds", async () => {
  const node = await startMeshNode([...SMALL_LLAMA, "--model", await testModel("tiny", "q8_0")], { models: { [`${EMBED}.gguf`]: await testModel("embed") } });
  nodes.push(node);
  // The mesh assigns the model and loads it again once its group is settled: wait for that, so no
  // request here races the reload.
  await node.child.waitForOutput(/hosting the model model=tiny-q8_0/, 60_000);
  await waitFor(async () => (await loaded(node)).some((s) => s.model_name === TINY && s.state === "ready"), { what: "the model to be served", timeoutMs: 60_000 });
  const ollama = new Ollama({ host: node.url });

  expect((await ollama.version()).version).toMatch(/^\d+\.\d+/);
  const list = await ollama.list();
  const names = list.models.map((m) => m.name).sort();
  expect(names).toEqual([`${EMBED}:latest`, `${TINY}:latest`]);
  const tiny = list.models.find((m) => m.name === `${TINY}:latest`)!;
  expect(tiny.size).toBeGreaterThan(0);
  expect(tiny.digest).toMatch(/^[0-9a-f]{64}$/);
  expect(tiny.details).toMatchObject({ format: "gguf", family: "llama", quantization_level: "Q8_0" });

  const shown = await ollama.show({ model: TINY });
  expect(shown.capabilities).toEqual(["completion"]);
  expect((shown.model_info as unknown as Record<string, unknown>)["general.architecture"]).toBe("llama");
  expect((await ollama.show({ model: EMBED })).capabilities).toEqual(["embedding"]);

  const whole = await ollama.chat({ model: `${TINY}:latest`, messages: [{ role: "user", content: "hello" }], stream: false, options: { num_predict: 4, temperature: 0, seed: 1 } });
  expect(whole).toMatchObject({ model: `${TINY}:latest`, done: true, message: { role: "assistant" } });
  expect(whole.eval_count).toBeGreaterThan(0);
  expect(whole.prompt_eval_count).toBeGreaterThan(0);
  expect(whole.total_duration).toBeGreaterThan(0);
  expect(["stop", "length"]).toContain(whole.done_reason);

  const parts = [];
  for await (const part of await ollama.chat({ model: TINY, messages: [{ role: "user", content: "hi" }], stream: true, options: { num_predict: 5, temperature: 0 } })) parts.push(part);
  expect(parts.length).toBeGreaterThanOrEqual(2);
  expect(parts.slice(0, -1).every((p) => !p.done)).toBe(true);
  expect(parts.at(-1)).toMatchObject({ done: true, done_reason: "length", eval_count: 5 });

  // Counted once each, under Ollama's route and the model, the stream timed at its end.
  const scraped = parseScrape(await (await fetch(`${node.url}/metrics`)).text());
  expect(valueOf(scraped, "mesh_requests_total", { route: "/api/chat", model: TINY, status: "200" })).toBe(2);
  expect(valueOf(scraped, "mesh_requests_total", { route: "/v1/chat/completions" })).toBe(0);
  expect(observationsOf(scraped, "mesh_request_duration_seconds", { route: "/api/chat", model: TINY })).toBe(2);
  expect(observationsOf(scraped, "mesh_time_to_first_byte_seconds", { route: "/api/chat", model: TINY })).toBe(1);

  const gen = await ollama.generate({ model: TINY, prompt: "once upon", stream: false, options: { num_predict: 3, temperature: 0 } });
  expect(gen).toMatchObject({ done: true, done_reason: "length", eval_count: 3 });
  expect(typeof gen.response).toBe("string");
  const genParts = [];
  for await (const part of await ollama.generate({ model: TINY, prompt: "x", stream: true, options: { num_predict: 3, temperature: 0 } })) genParts.push(part);
  expect(genParts.at(-1)).toMatchObject({ done: true, eval_count: 3 });

  const ps = await ollama.ps();
  expect(ps.models.map((m) => m.name)).toContain(`${TINY}:latest`);
  expect(new Date(ps.models[0]!.expires_at).getTime()).toBeGreaterThan(Date.now());

  const embedded = await ollama.embed({ model: EMBED, input: ["a", "b c"] });
  expect(embedded.embeddings.length).toBe(2);
  expect(embedded.embeddings[0]!.length).toBeGreaterThan(0);
  const legacy = await ollama.embeddings({ model: EMBED, prompt: "a" });
  expect(legacy.embedding.length).toBe(embedded.embeddings[0]!.length);

  // keep_alive 0: the model is unloaded once the answer is complete.
  expect((await ollama.ps()).models.map((m) => m.name)).toContain(`${EMBED}:latest`);
  await ollama.embed({ model: EMBED, input: "x", keep_alive: 0 });
  await waitFor(async () => !(await ollama.ps()).models.some((m) => m.name === `${EMBED}:latest`), { what: "the embed model to be unloaded", timeoutMs: 30_000 });

  // Errors in Ollama's shape and status.
  const missing = await ollama.chat({ model: "nowhere", messages: [{ role: "user", content: "x" }] }).catch((e: unknown) => e);
  expect(missing).toMatchObject({ status_code: 404 });
  expect((missing as Error).message).toContain("nowhere");
  const res = await fetch(`${node.url}/api/show`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "nowhere" }) });
  expect(res.status).toBe(404);
  expect(await res.json()).toEqual({ error: "model 'nowhere' not found" });
  // A bare name is no reference to pull from (pulls themselves: pull-api.test.ts).
  const pull = await ollama.pull({ model: "llama3" }).catch((e: unknown) => e);
  expect(pull).toMatchObject({ status_code: 400 });
  expect((pull as Error).message).toContain("is not a model reference");
  const bad = await fetch(`${node.url}/api/chat`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
  expect(bad.status).toBe(400);
  expect(await bad.json()).toEqual({ error: '"model" is required' });
  // A wrong method on an Ollama route: 405 with Allow, the error still Ollama's string.
  for (const [method, path, allow] of [["GET", "/api/chat", "POST"], ["POST", "/api/tags", "GET, HEAD"], ["GET", "/api/delete", "POST, DELETE"]] as const) {
    const wrong = await fetch(`${node.url}${path}`, { method, headers: { "content-type": "application/json" } });
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get("allow")).toBe(allow);
    expect(typeof ((await wrong.json()) as { error: unknown }).error).toBe("string");
  }
  // copy: a second name for the same file (a hard link), served like any model; nothing written over.
  await ollama.copy({ source: `${TINY}:latest`, destination: "tiny-copy" });
  expect((await ollama.list()).models.map((m) => m.name)).toContain("tiny-copy:latest");
  const tinyFile = await testModel("tiny", "q8_0");
  expect(statSync(join(node.modelsDir, "tiny-copy.gguf")).ino).toBe(statSync(tinyFile).ino);
  const copied = await ollama.chat({ model: "tiny-copy", messages: [{ role: "user", content: "hi" }], stream: false, options: { num_predict: 2, temperature: 0 } });
  expect(copied.done).toBe(true);
  const again = await ollama.copy({ source: TINY, destination: `${EMBED}` }).catch((e: unknown) => e);
  expect(again).toMatchObject({ status_code: 409 });
  expect(statSync(join(node.modelsDir, `${EMBED}.gguf`)).ino).not.toBe(statSync(tinyFile).ino);
  for (const destination of ["../escape", "a/b", ".hidden"]) {
    expect(await ollama.copy({ source: TINY, destination }).catch((e: unknown) => e)).toMatchObject({ status_code: 400 });
  }
  expect(existsSync(join(node.modelsDir, "..", "escape.gguf"))).toBe(false);
  // The management API beside it is untouched.
  expect((await fetch(`${node.url}/api/status`)).status).toBe(200);
  expect((await fetch(`${node.url}/api/v1/health`)).status).toBe(200);
});

test("two nodes: the Ollama client on a node without the model is served by the one that has it", async () => {
  const { host, entry } = await hostAndEntry(TINY, [...SMALL_LLAMA, "--model", await testModel("tiny", "q8_0")], SMALL_LLAMA, nodes);
  const ollama = new Ollama({ host: entry.url });
  await waitFor(async () => (await ollama.list()).models.some((m) => m.name === `${TINY}:latest`), { what: "the entry node to list the host's model", timeoutMs: 60_000 });

  const whole = await ollama.chat({ model: TINY, messages: [{ role: "user", content: "hello" }], stream: false, options: { num_predict: 4, temperature: 0 } });
  expect(whole).toMatchObject({ model: `${TINY}:latest`, done: true });
  expect(whole.eval_count).toBeGreaterThan(0);
  const parts = [];
  for await (const part of await ollama.chat({ model: TINY, messages: [{ role: "user", content: "hi" }], options: { num_predict: 5, temperature: 0 }, stream: true })) parts.push(part);
  expect(parts.at(-1)).toMatchObject({ done: true, done_reason: "length", eval_count: 5 });
  const gen = await ollama.generate({ model: TINY, prompt: "x", stream: false, options: { num_predict: 2, temperature: 0 } });
  expect(gen).toMatchObject({ done: true, eval_count: 2 });
  // Described as the host describes it: family, parameter size and quant from its GGUF header, as announced.
  const hostOllama = new Ollama({ host: host.url });
  const shown = await ollama.show({ model: TINY });
  const onHost = await hostOllama.show({ model: TINY });
  expect(shown.capabilities).toContain("completion");
  expect(onHost.details.parameter_size).toMatch(/^\d+(\.\d+)?[KMBT]?$/);
  expect(shown.details).toMatchObject({ format: "gguf", family: "llama", families: ["llama"], parameter_size: onHost.details.parameter_size, quantization_level: "Q8_0" });
  expect((shown.model_info as unknown as Record<string, unknown>)["general.parameter_count"]).toBe((onHost.model_info as unknown as Record<string, unknown>)["general.parameter_count"]);
  expect((await ollama.list()).models.find((m) => m.name === `${TINY}:latest`)!.details).toMatchObject({ family: "llama", parameter_size: onHost.details.parameter_size });
  // Served on the host: loaded there, nothing here; this node's ps lists it all the same, naming the host.
  expect(await loaded(entry)).toEqual([]);
  const ps = (await ollama.ps()).models;
  expect(ps.map((m) => m.name)).toEqual([`${TINY}:latest`]);
  expect(ps[0]!.details).toMatchObject({ family: "llama", parameter_size: onHost.details.parameter_size, served_by: host.nodeId });
  expect((await hostOllama.ps()).models.map((m) => m.name)).toEqual([`${TINY}:latest`]);
  // keep_alive "10m" through this node: its ps says when the model unloads as the host does (asked of it), not "never".
  await ollama.chat({ model: TINY, messages: [{ role: "user", content: "stay" }], stream: false, keep_alive: "10m", options: { num_predict: 2, temperature: 0 } });
  const [here] = (await ollama.ps()).models;
  const [there] = (await hostOllama.ps()).models;
  expect(new Date(here!.expires_at).getTime()).toBe(new Date(there!.expires_at).getTime());
  const inMinutes = (new Date(here!.expires_at).getTime() - Date.now()) / 60_000;
  expect(inMinutes).toBeGreaterThan(8);
  expect(inMinutes).toBeLessThanOrEqual(10);

  // keep_alive 0 through this node: the host unloads the model once the (streamed) answer is complete.
  const last = [];
  for await (const part of await ollama.chat({ model: TINY, messages: [{ role: "user", content: "bye" }], options: { num_predict: 3, temperature: 0 }, stream: true, keep_alive: 0 })) last.push(part);
  expect(last.at(-1)).toMatchObject({ done: true, eval_count: 3 });
  await waitFor(async () => !(await loaded(host)).some((s) => s.model_name === TINY), { what: "the host to unload the model after keep_alive 0", timeoutMs: 30_000 });
  expect((await hostOllama.ps()).models).toEqual([]);
  await waitFor(async () => (await ollama.ps()).models.length === 0, { what: "this node's ps to drop the host's model once it is unloaded" });
});

// Its own pair of nodes: members' unloads of one model on a node come at most once per 5 minutes,
// and the test above spent that (then the host leaves the model's group, and which node serves it
// next is a race the stop must not depend on).
test("ollama stop through a node without the model: an empty generate with keep_alive 0 unloads it on the host", async () => {
  const { host, entry } = await hostAndEntry(TINY, [...SMALL_LLAMA, "--model", await testModel("tiny", "q8_0")], SMALL_LLAMA, nodes);
  const ollama = new Ollama({ host: entry.url });
  await waitFor(async () => (await ollama.ps()).models.length === 1, { what: "this node's ps to list the host's model", timeoutMs: 60_000 });
  expect(await loaded(entry)).toEqual([]);
  expect(await ollama.generate({ model: TINY, prompt: "", keep_alive: 0, stream: false })).toMatchObject({ done: true, done_reason: "unload" });
  await waitFor(async () => !(await loaded(host)).some((s) => s.model_name === TINY), { what: "the host to unload the model on ollama stop", timeoutMs: 30_000 });
});

test("keep_alive: a negative one outlives the node's --idle-unload, a duration becomes the model's own", async () => {
  const node = await startNode([...SMALL_LLAMA, "--idle-unload", "2s"], { models: { "chat.gguf": await testModel("tiny", "q8_0"), "embed.gguf": await testModel("embed") } });
  nodes.push(node);
  const ollama = new Ollama({ host: node.url });
  const psOf = async (name: string) => (await ollama.ps()).models.find((m) => m.name === `${name}:latest`);

  // Kept loaded (-1), then a model with the node's 2 s: once that one has gone, the first is still there.
  await ollama.embed({ model: "embed", input: "x", keep_alive: -1 });
  expect(new Date((await psOf("embed"))!.expires_at).getUTCFullYear()).toBeGreaterThan(2100);
  await ollama.chat({ model: "chat", messages: [{ role: "user", content: "hi" }], options: { num_predict: 2, temperature: 0 } });
  expect(new Date((await psOf("chat"))!.expires_at).getTime()).toBeLessThan(Date.now() + 5_000);
  await waitFor(async () => !(await psOf("chat")), { what: "the chat model to be unloaded by --idle-unload", timeoutMs: 30_000 });
  expect(await psOf("embed")).toBeDefined();

  // "2s" replaces the -1: it unloads about 2 s after its answer, and /api/ps says when.
  await ollama.embed({ model: "embed", input: "x", keep_alive: "2s" });
  const answered = Date.now();
  const expires = new Date((await psOf("embed"))!.expires_at).getTime();
  expect(expires).toBeGreaterThan(answered);
  expect(expires).toBeLessThan(answered + 3_000);
  await waitFor(async () => !(await psOf("embed")), { what: "the embed model to be unloaded after its keep_alive", timeoutMs: 30_000 });
  expect(Date.now() - answered).toBeGreaterThanOrEqual(1_500);
});

test("--ollama-listen: the same API on a second listener, with the keys, and the browser guard held to its host", async () => {
  const node = await startNode([...SMALL_LLAMA, "--listen", "0.0.0.0", "--api-key", "k", "--ollama-listen", "127.0.0.1:0"], { models: { "chat.gguf": await testModel("tiny", "q8_0") } });
  nodes.push(node);
  const url = (await node.child.waitForOutput(/ollama API listening on (http:\/\/127\.0\.0\.1:\d+)/, 10_000))[1]!;
  expect(url).not.toBe(node.url);
  const ollama = new Ollama({ host: url, headers: { authorization: "Bearer k" } });
  expect((await ollama.list()).models.map((m) => m.name)).toEqual(["chat:latest"]);
  expect(await ollama.chat({ model: "chat", messages: [{ role: "user", content: "hi" }], stream: false, options: { num_predict: 2, temperature: 0 } })).toMatchObject({ done: true, eval_count: 2 });
  // The API keys hold there too, in Ollama's shape.
  const keyless = await fetch(`${url}/api/tags`);
  expect(keyless.status).toBe(401);
  expect(typeof ((await keyless.json()) as { error: unknown }).error).toBe("string");
  // That listener is on loopback: a rebinding name is refused there, while --listen 0.0.0.0 answers any name.
  const rebind = { host: "rebind.attacker.example", authorization: "Bearer k" };
  expect((await fetch(`${url}/api/tags`, { headers: rebind })).status).toBe(421);
  expect((await fetch(`${node.url}/api/tags`, { headers: rebind })).status).toBe(200);
  // Its root answers as Ollama's does (tools probe it); the console's page is the main listener's root.
  expect(await (await fetch(`${url}/`)).text()).toBe("Ollama is running");
  expect(await (await fetch(`${node.url}/`)).text()).toContain("/console/app.js");
});

test("--ollama-listen: beyond loopback without a key is refused, a port in use is a clear error", async () => {
  const state = mkdtempSync(join(tmpdir(), "mesh-test-state-"));
  const base = ["--port", "0", "--state-dir", state, "--relay", "disabled", "--quic-bind", "127.0.0.1:0"];
  const open = spawnChild("mesh", [...meshCommand(), ...base, "--ollama-listen", "0.0.0.0:0"], { env: { MESH_LLAMA_DIR: devLlamaDir() } });
  expect(await open.proc.exited).toBe(1);
  expect(open.output()).toContain("refusing to serve the API on 0.0.0.0 (--ollama-listen) without an --api-key");
  expect(open.output()).not.toContain("listening");

  const taken = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("someone else") });
  try {
    const clash = spawnChild("mesh", [...meshCommand(), ...base, "--ollama-listen", `127.0.0.1:${taken.port}`], { env: { MESH_LLAMA_DIR: devLlamaDir() } });
    expect(await clash.proc.exited).toBe(1);
    expect(clash.output()).toContain(`cannot listen on 127.0.0.1:${taken.port} (--ollama-listen): the port is in use`);
  } finally {
    taken.stop(true);
    rmSync(state, { recursive: true, force: true });
  }
});
