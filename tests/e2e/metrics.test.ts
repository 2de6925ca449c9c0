/**
 * `GET /metrics` of real nodes: scraped before and after plain and streamed chats, a request for an
 * unknown model and a bad body, parsed as Prometheus text, and the counters moved by exactly what
 * was sent; open without the API key the `/v1` routes need. Two nodes: a request sent to a peer is
 * counted on both, its tokens where its model answered.
 */
import { afterAll, afterEach, expect, test } from "bun:test";
import { killAllChildren } from "../../harness/children.ts";
import { startMeshNode, waitForFullMesh, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA, startNode, type TestNode } from "../../harness/node.ts";
import { labelSets, observationsOf, parseScrape, valueOf, type Scrape } from "../../harness/prometheus.ts";
import { waitFor } from "../../harness/wait.ts";

const nodes: TestNode[] = [];
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
});
afterAll(killAllChildren);

const KEY = "metrics-test-key";
const CHAT = "/v1/chat/completions";

async function scrape(n: TestNode): Promise<Scrape> {
  const res = await fetch(`${n.url}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toStartWith("text/plain; version=0.0.4");
  return parseScrape(await res.text());
}

function chat(n: TestNode, body: object | string, key: string | null = KEY): Promise<Response> {
  return fetch(`${n.url}${CHAT}`, {
    method: "POST",
    headers: key ? { authorization: `Bearer ${key}` } : {},
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

const hello = { messages: [{ role: "user", content: "hello" }] };
type Usage = { prompt_tokens: number; completion_tokens: number };

test("requests by status, durations, time to first byte, tokens and loads; open without the API key", async () => {
  const n = await startNode([...SMALL_LLAMA, "--api-key", KEY], { models: { "chat.gguf": await testModel("tiny", "q8_0") } });
  nodes.push(n);
  const before = await scrape(n);
  expect(valueOf(before, "mesh_model_loads_total")).toBe(0);
  expect(valueOf(before, "mesh_requests_total")).toBe(0);

  const usages: Usage[] = [];
  for (let i = 0; i < 2; i++) {
    const res = await chat(n, { model: "chat", ...hello, max_tokens: 3 });
    expect(res.status).toBe(200);
    usages.push(((await res.json()) as { usage: Usage }).usage);
  }
  // ignore_eos: exactly 4 tokens whatever the random weights say.
  const stream = await chat(n, { model: "chat", ...hello, max_tokens: 4, ignore_eos: true, stream: true });
  expect(stream.status).toBe(200);
  expect(await stream.text()).toContain("data: [DONE]");
  expect((await chat(n, { model: "no-such-model", ...hello })).status).toBe(404);
  expect((await chat(n, "{not json")).status).toBe(400);
  expect((await chat(n, { model: "chat", ...hello }, null)).status).toBe(401);

  const after = await scrape(n);
  const requests = (labels: Record<string, string>) => valueOf(after, "mesh_requests_total", labels) - valueOf(before, "mesh_requests_total", labels);
  expect(requests({ model: "chat", route: CHAT, status: "200" })).toBe(3);
  expect(requests({ model: "unknown", route: CHAT, status: "404" })).toBe(1);
  expect(requests({ model: "", route: CHAT, status: "400" })).toBe(1);
  expect(requests({ model: "", route: CHAT, status: "401" })).toBe(1);
  expect(requests({})).toBe(6);
  expect(labelSets(after, "mesh_requests_total").map((l) => l.model)).not.toContain("no-such-model");

  // Two JSON answers timed when they came back, the stream when it ended; only the stream has a first byte.
  expect(observationsOf(after, "mesh_request_duration_seconds", { model: "chat", route: CHAT })).toBe(3);
  expect(observationsOf(after, "mesh_time_to_first_byte_seconds", { model: "chat", route: CHAT })).toBe(1);

  // The same prompt each time: the stream's prompt is as long as the others'.
  const promptTokens = usages[0]!.prompt_tokens;
  expect(promptTokens).toBeGreaterThan(0);
  expect(valueOf(after, "mesh_tokens_total", { model: "chat", direction: "in" })).toBe(3 * promptTokens);
  expect(valueOf(after, "mesh_tokens_total", { model: "chat", direction: "out" })).toBe(usages[0]!.completion_tokens + usages[1]!.completion_tokens + 4);

  expect(valueOf(after, "mesh_model_loads_total")).toBeGreaterThanOrEqual(1);
  expect(valueOf(after, "mesh_model_load_failures_total")).toBe(0);
  expect(valueOf(after, "mesh_model_evictions_total")).toBe(0);
  expect(valueOf(after, "mesh_models_loaded", {}, "gauge")).toBe(1);
  expect(valueOf(after, "mesh_peers", {}, "gauge")).toBe(0);
});

test("a request sent to the peer that serves its model is counted on both nodes, its tokens on the peer", async () => {
  const tiny = await testModel("tiny", "q8_0");
  const host: MeshTestNode = await startMeshNode([...SMALL_LLAMA, "--model", tiny]);
  nodes.push(host);
  const entry: MeshTestNode = await startMeshNode([...SMALL_LLAMA, "--join", host.token]);
  nodes.push(entry);
  await waitForFullMesh([host, entry]);
  await waitFor(
    async () => {
      const list = (await (await fetch(`${entry.url}/v1/models`)).json()) as { data: { id: string; status: string }[] };
      return list.data.some((m) => m.id === "tiny-q8_0" && m.status === "loaded");
    },
    { what: "the entry to see the host's model loaded" },
  );

  const res = await chat(entry, { model: "tiny-q8_0", ...hello, max_tokens: 2 }, null);
  expect(res.status).toBe(200);
  const usage = ((await res.json()) as { usage: Usage }).usage;

  const [e, h] = [await scrape(entry), await scrape(host)];
  expect(valueOf(e, "mesh_peers", {}, "gauge")).toBe(1);
  expect(valueOf(h, "mesh_peers", {}, "gauge")).toBe(1);
  expect(valueOf(e, "mesh_forwarded_requests_total", { peer: host.nodeId.slice(0, 10) })).toBe(1);
  expect(valueOf(e, "mesh_requests_total", { model: "tiny-q8_0", route: CHAT, status: "200" })).toBe(1);
  expect(valueOf(h, "mesh_requests_total", { model: "tiny-q8_0", route: CHAT, status: "200" })).toBe(1);
  expect(valueOf(e, "mesh_tokens_total")).toBe(0);
  expect(valueOf(h, "mesh_tokens_total", { model: "tiny-q8_0", direction: "out" })).toBe(usage.completion_tokens);
});
