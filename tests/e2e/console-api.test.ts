/**
 * The console's event stream against a real node: a `hello` with the state, traffic history and
 * log; then, without asking again, the state when a model loads and unloads, traffic samples that
 * count a chat, and log lines as they are written.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { ConsoleEvents, ConsoleHello, ConsoleState, TrafficSample } from "../../console/protocol.ts";
import { SseParser } from "../../console/src/sse.ts";
import { chat, post } from "../../harness/api.ts";
import { killAllChildren } from "../../harness/children.ts";
import { testModel } from "../../harness/models.ts";
import { SMALL_LLAMA, startNode, type TestNode } from "../../harness/node.ts";
import { withDeadline } from "../../harness/wait.ts";

let node: TestNode;

beforeAll(async () => {
  node = await startNode([...SMALL_LLAMA], { models: { "tiny-q8_0.gguf": await testModel("tiny", "q8_0") } });
  // Until its mesh endpoint is up a node knows no id of its own, and shows no node.
  await node.child.waitForOutput(/mesh endpoint up/, 60_000);
}, 120_000);

afterAll(async () => {
  await node?.stop();
  await killAllChildren();
});

type Event = { [K in keyof ConsoleEvents]: { event: K; data: ConsoleEvents[K] } }[keyof ConsoleEvents];

/** Reads the stream's events as they come, with the page's own parser. */
async function* events(res: Response): AsyncGenerator<Event> {
  const parser = new SseParser();
  const reader = res.body!.getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      for (const m of parser.push(value)) yield { event: m.event, data: JSON.parse(m.data) } as Event;
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

/** The first event `pick` accepts, within a deadline. */
async function next<T>(stream: AsyncGenerator<Event>, pick: (e: Event) => T | undefined, what: string, timeoutMs = 60_000): Promise<T> {
  return withDeadline(
    (async () => {
      // Not `for await`: leaving that loop would close the stream for the next wait.
      for (let r = await stream.next(); !r.done; r = await stream.next()) {
        const hit = pick(r.value);
        if (hit !== undefined) return hit;
      }
      throw new Error(`the stream ended before ${what}`);
    })(),
    timeoutMs,
    what,
  );
}

const modelIn = (s: ConsoleState) => s.models.find((m) => m.name === "tiny-q8_0");

test("one stream tells a page everything: hello, state changes, traffic and log lines", async () => {
  const controller = new AbortController();
  const res = await fetch(`${node.url}/api/console/events`, { signal: controller.signal });
  try {
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const stream = events(res);
    const hello: ConsoleHello = await next(stream, (e) => (e.event === "hello" ? e.data : undefined), "hello");
    expect(hello.state.nodes.length).toBe(1);
    expect(hello.state.nodes[0]).toMatchObject({ self: true, state: "up", quicPath: "self" });
    expect(modelIn(hello.state)).toMatchObject({ status: "unloaded", onThisNode: true, type: "llm", quant: "Q8_0" });
    expect(hello.logs.some((l) => l.msg.startsWith("mesh API listening"))).toBe(true);

    expect((await post(node, "/api/v1/load", { model_name: "tiny-q8_0", pinned: true })).status).toBe(200);
    const ready = await next(stream, (e) => (e.event === "state" && modelIn(e.data)?.status === "ready" ? e.data : undefined), "a state with the model ready");
    expect(modelIn(ready)).toMatchObject({ loadedHere: true, pinned: true, host: ready.self, members: [{ id: ready.self, role: "host", share: 1 }] });
    expect(ready.nodes[0]!.roles).toEqual([{ model: "tiny-q8_0", role: "host" }]);

    expect((await chat(node, "tiny-q8_0", 4)).status).toBe(200);
    const counted: TrafficSample = await next(stream, (e) => (e.event === "traffic" && (e.data.models["tiny-q8_0"]?.requests ?? 0) >= 1 ? e.data : undefined), "a traffic sample counting the chat");
    expect(counted.models["tiny-q8_0"]!.tokensOut).toBeGreaterThan(0);

    expect((await post(node, "/api/v1/unload", { model_name: "tiny-q8_0" })).status).toBe(200);
    const lines: string[] = [];
    await next(
      stream,
      (e) => {
        if (e.event === "log") lines.push(e.data.msg);
        return e.event === "state" && modelIn(e.data)?.status === "unloaded" ? true : undefined;
      },
      "a state with the model unloaded",
    );
    // The unload was logged, and the page heard it on the same stream.
    expect(lines.length).toBeGreaterThan(0);
  } finally {
    controller.abort();
  }
});

test("the state answers whole, and the page's files are served with a policy that keeps other pages out", async () => {
  const state = (await (await fetch(`${node.url}/api/console/state`)).json()) as ConsoleState;
  expect(state.self).toMatch(/^[0-9a-f]{64}$/);
  const page = await fetch(`${node.url}/`);
  expect(page.status).toBe(200);
  expect(page.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
  expect(await page.text()).toContain("/console/app.js");
  const js = await fetch(`${node.url}/console/app.js`);
  expect(js.status).toBe(200);
  expect(js.headers.get("content-type")).toContain("javascript");
});

test("unloading the model a node hosts for its mesh (its --model) lets it go, as when idle: it stays unloaded until a request", async () => {
  const hosting = await startNode([...SMALL_LLAMA, "--model", "tiny-q8_0"], { models: { "tiny-q8_0.gguf": await testModel("tiny", "q8_0") } });
  const controller = new AbortController();
  try {
    const res = await fetch(`${hosting.url}/api/console/events`, { signal: controller.signal });
    const stream = events(res);
    await next(stream, (e) => ((e.event === "hello" || e.event === "state") && modelIn("state" in e.data ? e.data.state : e.data)?.status === "ready" ? true : undefined), "the model ready");
    expect((await post(hosting, "/api/v1/unload", { model_name: "tiny-q8_0" })).status).toBe(200);
    await next(stream, (e) => (e.event === "state" && modelIn(e.data)?.status === "unloaded" ? true : undefined), "the model unloaded");
    // Two traffic samples later (4 s, in which a bounce would have started a load) it is still down.
    let samples = 0;
    await next(stream, (e) => {
      if (e.event === "state") expect(modelIn(e.data)?.status).toBe("unloaded");
      return e.event === "traffic" && ++samples === 2 ? true : undefined;
    }, "two traffic samples");
    const health = (await (await fetch(`${hosting.url}/api/v1/health`)).json()) as { all_models_loaded: unknown[] };
    expect(health.all_models_loaded).toEqual([]);
    // Out of its group, as an idle model is: nothing will load it but a request.
    const status = (await (await fetch(`${hosting.url}/api/status`)).json()) as { models: { assigned: string | null; idle: string[] } };
    expect(status.models).toMatchObject({ assigned: null, idle: ["tiny-q8_0"] });
    // A request loads it again on demand.
    expect((await chat(hosting, "tiny-q8_0", 2)).status).toBe(200);
  } finally {
    controller.abort();
    await hosting.stop();
  }
});
