/**
 * A conversation's KV cache follows it across the mesh, with real nodes and real llama-servers: a
 * chat answered by a replica that is then released (it saves its slots) goes on at the host, which
 * fetches the chat's KV from the replica's node over the mesh, restores it into its slot and reads
 * only what is new; its answer at temperature 0 is the one a full read gives.
 */
import { afterAll, afterEach, expect, test } from "bun:test";
import { post } from "../../harness/api.ts";
import { burst } from "../../harness/burst.ts";
import { killAllChildren } from "../../harness/children.ts";
import { meshStatus, startMeshNode, waitForFullMesh, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA } from "../../harness/node.ts";
import { parseScrape, valueOf } from "../../harness/prometheus.ts";
import { identityKnown, keepsSlots, savedSlots } from "../../harness/slot-files.ts";
import { waitFor } from "../../harness/wait.ts";
import { ANSWERED_BY_HEADER } from "../../mesh/mesh-headers.ts";

const nodes: MeshTestNode[] = [];
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
});
afterAll(killAllChildren);

const MODEL = "wide-q8_0";
const WORDS = ["river", "stone", "cloud", "mesh", "node", "token", "cache", "prefix", "alpha", "delta", "harbor", "lantern"];
/** A long system prompt, the same every run (the test model reads a word as a few tokens). */
const SYSTEM = Array.from({ length: 100 }, (_, i) => WORDS[(i * 7) % WORDS.length]).join(" ");

interface Answer {
  text: string;
  by: string | null;
  timings: { cache_n: number; prompt_n: number };
}

async function chat(via: MeshTestNode, messages: { role: string; content: string }[], session: string, extra: Record<string, unknown> = {}): Promise<Answer> {
  const res = await post(via, "/v1/chat/completions", { model: MODEL, messages, max_tokens: 8, temperature: 0, ...extra }, { headers: { "x-session-id": session } });
  const body = (await res.json()) as { choices?: { message: { content: string } }[]; timings?: Answer["timings"] };
  if (res.status !== 200 || !body.timings || !body.choices) throw new Error(`chat: ${res.status} ${JSON.stringify(body)}`);
  return { text: body.choices[0]!.message.content, by: res.headers.get(ANSWERED_BY_HEADER), timings: body.timings };
}

const listed = async (n: MeshTestNode) =>
  ((await (await fetch(`${n.url}/v1/models`)).json()) as { data: { id: string; mesh?: { content_holders?: string[] } }[] }).data.find((m) => m.id === MODEL);
const peer = async (of: MeshTestNode, id: string) => (await meshStatus(of)).peers.find((p) => p.nodeId === id);
const scrape = async (n: MeshTestNode) => parseScrape(await (await fetch(`${n.url}/metrics`)).text());

/** Over b's direct path (TLS, the default), and over the mesh connection where b offers none. */
const PATHS = [
  { path: "direct path (TLS)", args: [] },
  { path: "mesh connection", args: ["--rpc-direct", "off"] },
];

test.each(PATHS)("a chat moved off a released replica: the host fetches its KV from that node over the $path, reads only what is new, and answers as a full read does", async ({ path, args }) => {
  const file = await testModel("wide", "q8_0");
  const a = await startMeshNode([...SMALL_LLAMA, "--vram", "512MiB", "--model", MODEL], { models: { [`${MODEL}.gguf`]: file }, name: "a" });
  nodes.push(a);
  const identity = await identityKnown(a, MODEL);
  await keepsSlots(a, MODEL, identity);
  // The replica's idle time outlasts the burst's last answers at a (six chats of 48 tokens, queued
  // on a loaded machine: a clean-clone CI saw b's replica let go before the chat's first turn).
  const b = await startMeshNode([...SMALL_LLAMA, ...args, "--vram", "256MiB", "--replica-idle", "15s", "--join", a.token], { models: { [`${MODEL}.gguf`]: file }, name: "b" });
  nodes.push(b);
  await waitForFullMesh([a, b]);
  // b's replica keeps its slots only when b knows the model's content as it loads it (its saved slots are filed by it).
  await waitFor(async () => (await listed(a))?.mesh?.content_holders?.includes(b.nodeId), { what: "b to announce the model's content" });

  // A burst at the host makes b a replica.
  const stop = new AbortController();
  const answered = burst(a, MODEL, 6, stop.signal, new Set());
  try {
    await waitFor(async () => (await peer(a, b.nodeId))?.serving.includes(MODEL), { what: "b to serve a replica", timeoutMs: 90_000 });
  } finally {
    stop.abort();
  }
  await answered;

  // The chat's first turn is b's client's: its own replica answers it.
  const session = "chat-1";
  const first = [
    { role: "system", content: SYSTEM },
    { role: "user", content: "name the stone" },
  ];
  const one = await chat(b, first, session);
  expect(one.by).toBe(b.nodeId);
  expect(one.timings.prompt_n).toBeGreaterThan(160);

  // Requests stopped: the replica is released, and its server saves the chat's slot as it goes (asked at once, below).
  await b.child.waitForOutput(/releasing a replica/, 60_000);
  await waitFor(async () => !(await peer(a, b.nodeId))?.serving.includes(MODEL), { what: "a to see b's replica gone", timeoutMs: 30_000 });

  const next = [...first, { role: "assistant", content: one.text }, { role: "user", content: "and the river" }];
  // The next turn, from the same client: b serves the model no more, so a answers, told where the chat was.
  const two = await chat(b, next, session);
  expect(two.by).toBe(a.nodeId);
  // The replica left the routes before its slots were saved; b answered a's ask once the save was done.
  expect(savedSlots(b).length).toBeGreaterThan(0);
  // Everything but the last few tokens came from b's cache: whole 64-token blocks of the shared prefix.
  expect(two.timings.cache_n).toBeGreaterThanOrEqual(128);
  expect(two.timings.cache_n % 64).toBe(0);
  const m = await scrape(a);
  expect(valueOf(m, "mesh_kv_follow_total", { event: "hit" })).toBe(1);
  expect(valueOf(m, "mesh_kv_follow_total", { event: "failed" })).toBe(0);
  expect(valueOf(m, "mesh_kv_follow_bytes_total", { direction: "fetched" })).toBeGreaterThan(0);
  expect(valueOf(await scrape(b), "mesh_kv_follow_bytes_total", { direction: "sent" })).toBe(valueOf(m, "mesh_kv_follow_bytes_total", { direction: "fetched" }));
  expect(a.child.output().match(/KV caches from this peer go over the (direct path \(TLS\)|mesh connection)/)?.[1]).toBe(path);
  expect(a.child.output()).not.toContain("KV caches over the direct path failed");

  // The same turn read whole (no cache at all) gives the same answer.
  const whole = await chat(a, next, "another-session", { cache_prompt: false });
  expect(whole.timings.cache_n).toBe(0);
  expect(two.text).toBe(whole.text);
}, 240_000);
