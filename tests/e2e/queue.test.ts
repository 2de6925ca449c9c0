/**
 * The queue in front of a model's slots, on a real node and llama-server with two slots and room
 * for two waiters: a burst of three times the slots is answered in full, each request with its
 * answer or a 429 and Retry-After, none lost or left hanging; a waiter whose client gives up leaves
 * its place to the next; `/metrics` shows slots, requests running and waiting, waits and refusals;
 * a request a member forwards and the host's full queue refuses reaches its client as that 429.
 * Slots are held by long generations whose clients stop them, so who runs, waits or is refused
 * does not depend on timing.
 */
import { afterAll, afterEach, expect, test } from "bun:test";
import { openStream, post } from "../../harness/api.ts";
import { killAllChildren } from "../../harness/children.ts";
import { hostAndEntry, type MeshTestNode } from "../../harness/mesh.ts";
import { testModel } from "../../harness/models.ts";
import { startNode, type TestNode } from "../../harness/node.ts";
import { observationsOf, parseScrape, valueOf } from "../../harness/prometheus.ts";
import { waitFor, withDeadline } from "../../harness/wait.ts";

const nodes: TestNode[] = [];
afterEach(async () => {
  await Promise.all(nodes.splice(0).map((n) => n.stop()));
});
afterAll(killAllChildren);

const SLOTS = 2;
const MAX_QUEUE = 2;
/** A generation far longer than the test: its slot is held until its client lets go. */
const LONG = 16_000;
const ANSWER_MS = 60_000;

async function queueNode(extra: string[] = []): Promise<TestNode> {
  const n = await startNode(
    // Each of the two slots gets half the context: room for the long generations.
    ["--ctx-size", String(2 * (LONG + 384)), "--llamacpp-args", `--threads 1 --threads-batch 1 --parallel ${SLOTS}`, "--rpc-threads", "1", "--max-queue", String(MAX_QUEUE), ...extra],
    { models: { "chat.gguf": await testModel("tiny", "q8_0") } },
  );
  nodes.push(n);
  return n;
}

async function figures(n: TestNode, model = "chat") {
  const s = parseScrape(await (await fetch(`${n.url}/metrics`)).text());
  const gauge = (name: string) => valueOf(s, name, { model }, "gauge");
  return {
    slots: gauge("mesh_queue_slots"),
    inFlight: gauge("mesh_queue_in_flight"),
    queued: gauge("mesh_queue_depth"),
    rejected: valueOf(s, "mesh_queue_rejected_total", { model }),
    waits: observationsOf(s, "mesh_queue_wait_seconds", { model }),
  };
}

const until = (n: TestNode, what: string, ok: (f: Awaited<ReturnType<typeof figures>>) => boolean, model = "chat") =>
  waitFor(async () => ok(await figures(n, model)), { what, timeoutMs: ANSWER_MS });

/** A short streamed chat, read to its end: its status, Retry-After and text. */
async function shortChat(n: TestNode, signal?: AbortSignal, model = "chat"): Promise<{ status: number; retryAfter: string | null; text: string }> {
  const res = await post(n, "/v1/chat/completions", { model, messages: [{ role: "user", content: "hello" }], max_tokens: 4, ignore_eos: true, stream: true }, { signal });
  return { status: res.status, retryAfter: res.headers.get("retry-after"), text: await res.text() };
}

/** Two long generations holding both slots, with their first tokens in. */
async function holdSlots(n: TestNode) {
  const abort = new AbortController();
  const holders = await Promise.all(Array.from({ length: SLOTS }, () => openStream(n, "chat", LONG, abort.signal)));
  await until(n, "both slots to be held", (f) => f.inFlight === SLOTS);
  return {
    release: async () => {
      abort.abort();
      await Promise.all(holders.map((h) => h.reader.cancel().catch(() => undefined)));
    },
  };
}

function expectRefused(r: { status: number; retryAfter: string | null; text: string }) {
  expect(r.status).toBe(429);
  expect(Number(r.retryAfter)).toBeGreaterThanOrEqual(1);
  const body = JSON.parse(r.text) as { error: { code: string; message: string } };
  expect(body.error.code).toBe("model_queue_full");
  expect(body.error.message).toContain("--max-queue");
}

test("a burst of three times the slots: every request answered or refused with Retry-After, none lost; /metrics shows the queue", async () => {
  const n = await queueNode();
  // Loaded, and its slots read from llama-server (/props).
  expect((await shortChat(n)).status).toBe(200);
  expect(await figures(n)).toMatchObject({ slots: SLOTS, inFlight: 0, queued: 0, rejected: 0 });

  const held = await holdSlots(n);
  // The other four at once: two wait, two are refused at once.
  const burst = Array.from({ length: 3 * SLOTS - SLOTS }, () => shortChat(n));
  await until(n, "two requests waiting and two refused", (f) => f.queued === MAX_QUEUE && f.rejected === 2);
  await held.release();
  const answers = await withDeadline(Promise.all(burst), ANSWER_MS, "every request of the burst to be answered");
  const ok = answers.filter((a) => a.status === 200);
  const refused = answers.filter((a) => a.status !== 200);
  expect(ok).toHaveLength(MAX_QUEUE);
  for (const a of ok) expect(a.text).toContain("data: [DONE]");
  expect(refused).toHaveLength(2);
  for (const r of refused) expectRefused(r);

  await until(n, "the queue to be empty", (f) => f.inFlight === 0 && f.queued === 0);
  const f = await figures(n);
  expect(f.rejected).toBe(2);
  // The first chat, the two holders, the two that waited.
  expect(f.waits).toBe(1 + SLOTS + MAX_QUEUE);
});

test("one API key's requests fill the queue; another key's request still waits its turn and is answered", async () => {
  const keys = { a: "queue-key-a", b: "queue-key-b" };
  const n = await queueNode(["--api-key", keys.a, "--api-key", keys.b]);
  const as = (key: string, signal?: AbortSignal) =>
    post(n, "/v1/chat/completions", { model: "chat", messages: [{ role: "user", content: "hello" }], max_tokens: 4, ignore_eos: true, stream: true }, { signal, headers: { "content-type": "application/json", authorization: `Bearer ${key}` } }).then(
      async (res) => ({ status: res.status, retryAfter: res.headers.get("retry-after"), text: await res.text() }),
    );
  expect((await as(keys.a)).status).toBe(200);
  const abort = new AbortController();
  const holders = await Promise.all(Array.from({ length: SLOTS }, () => openStream(n, "chat", LONG, abort.signal, { authorization: `Bearer ${keys.a}` })));
  await until(n, "both slots held by key a", (f) => f.inFlight === SLOTS);
  const fromA = Array.from({ length: MAX_QUEUE }, () => as(keys.a));
  await until(n, "key a's requests filling the queue", (f) => f.queued === MAX_QUEUE);
  // Key b gets a place: key a's newest waiter gives it up (429), key a keeps the rest.
  const fromB = as(keys.b);
  await until(n, "key a's newest refused in its place", (f) => f.rejected === 1 && f.queued === MAX_QUEUE);
  abort.abort();
  await Promise.all(holders.map((h) => h.reader.cancel().catch(() => undefined)));
  const b = await withDeadline(fromB, ANSWER_MS, "key b's request to be answered");
  expect(b.status).toBe(200);
  const a = await withDeadline(Promise.all(fromA), ANSWER_MS, "key a's waiters to be answered");
  expect(a.filter((r) => r.status === 200)).toHaveLength(MAX_QUEUE - 1);
  for (const r of a.filter((x) => x.status !== 200)) {
    expectRefused(r);
    expect(r.text).toContain("took its place");
  }
});

test("a waiting request whose client gives up leaves at once, and its place goes to the next", async () => {
  const n = await queueNode();
  expect((await shortChat(n)).status).toBe(200);
  const held = await holdSlots(n);

  const gaveUp = new AbortController();
  const first = shortChat(n, gaveUp.signal).catch((err: unknown) => ({ status: 0, retryAfter: null, text: String(err) }));
  await until(n, "one request waiting", (f) => f.queued === 1);
  const second = shortChat(n);
  await until(n, "the queue full", (f) => f.queued === MAX_QUEUE);
  expectRefused(await shortChat(n));

  gaveUp.abort();
  expect((await first).status).toBe(0);
  await until(n, "the place to be free", (f) => f.queued === MAX_QUEUE - 1);
  // Taken by a new request, not refused.
  const third = shortChat(n);
  await until(n, "the queue full again", (f) => f.queued === MAX_QUEUE);

  await held.release();
  for (const a of await withDeadline(Promise.all([second, third]), ANSWER_MS, "the waiters to be answered")) {
    expect(a.status).toBe(200);
    expect(a.text).toContain("data: [DONE]");
  }
  await until(n, "the queue to be empty", (f) => f.inFlight === 0 && f.queued === 0);
  expect((await figures(n)).rejected).toBe(1);
});

test("a member's request refused by the host's full queue reaches its client as the 429, Retry-After and all", async () => {
  const model = "tiny-q8_0";
  const mesh: MeshTestNode[] = [];
  const small = ["--llamacpp-args", "--threads 1 --threads-batch 1 --parallel 1", "--rpc-threads", "1"];
  try {
    // No waiting at the host; the entry takes no replica (it would copy the model to relieve the host).
    const { host, entry } = await hostAndEntry(model, [...small, "--ctx-size", String(LONG + 384), "--max-queue", "0", "--model", await testModel("tiny", "q8_0")], [...small, "--ctx-size", "512", "--replicas", "off"], mesh);
    const abort = new AbortController();
    const holder = await openStream(host, model, LONG, abort.signal);
    await until(host, "the host's slot to be held", (f) => f.inFlight === 1, model);
    expectRefused(await shortChat(entry, undefined, model));
    expect((await figures(host, model)).rejected).toBe(1);
    abort.abort();
    await holder.reader.cancel().catch(() => undefined);
    await until(host, "the slot to be free", (f) => f.inFlight === 0, model);
    expect((await shortChat(entry, undefined, model)).status).toBe(200);
  } finally {
    await Promise.all(mesh.map((n) => n.stop()));
  }
});
