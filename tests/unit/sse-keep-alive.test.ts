/** SSE keep-alives in the proxy: a comment after a quiet spell, only between events, never after the end. */
import { afterAll, expect, test } from "bun:test";
import type { Lease } from "../../pool/pool.ts";
import { atEventBoundary, proxyToServer } from "../../router/serving/proxy.ts";

const encoder = new TextEncoder();
/** The stand-in llama-server's script for each path: each chunk after a pause (ms). */
const SCRIPTS: Record<string, [number, string][]> = {
  "/quiet": [[0, 'data: {"a":1}\n\n'], [400, 'data: {"a":2}\n\n'], [0, "data: [DONE]\n\n"]],
  "/split": [[0, 'data: {"a":'], [400, '1}\n\n'], [0, "data: [DONE]\n\n"]],
  "/busy": [[0, 'data: {"a":1}\n\n'], [40, 'data: {"a":2}\n\n'], [40, 'data: {"a":3}\n\n'], [0, "data: [DONE]\n\n"]],
};

const upstream = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch(req) {
    const script = [...(SCRIPTS[new URL(req.url).pathname] ?? [])];
    const body = new ReadableStream<Uint8Array>({
      // Every pull enqueues or closes: Bun's server pulls no more after one that does neither.
      async pull(c) {
        const step = script.shift();
        if (step === undefined) return c.close();
        await Bun.sleep(step[0]);
        c.enqueue(encoder.encode(step[1]));
      },
    });
    return new Response(body, { headers: { "content-type": "text/event-stream" } });
  },
});
afterAll(() => upstream.stop(true));

async function proxied(path: string, keepAliveMs: number): Promise<{ text: string; released: boolean }> {
  let released = false;
  const lease = { server: { url: `http://127.0.0.1:${upstream.port}`, gone: new AbortController().signal, pastFence: async () => undefined }, release: () => void (released = true) } as unknown as Lease;
  const res = await proxyToServer({ lease, model: "m", path, body: new ArrayBuffer(0), clientSignal: new AbortController().signal, onStats: () => undefined, keepAliveMs });
  return { text: await res.text(), released };
}

test("a stream quiet longer than the keep-alive interval gets a comment between its events", async () => {
  const { text, released } = await proxied("/quiet", 90);
  expect(text).toMatch(/^data: \{"a":1\}\n\n(: keep-alive\n\n)+data: \{"a":2\}\n\ndata: \[DONE\]\n\n$/);
  expect(released).toBe(true);
});

test("no comment inside a half-sent event, however long it pauses", async () => {
  const { text } = await proxied("/split", 90);
  expect(text).toMatch(/^(: keep-alive\n\n)*data: \{"a":1\}\n\ndata: \[DONE\]\n\n$/);
  expect(text).not.toContain('"a":: keep-alive');
});

test("a stream that keeps talking gets none", async () => {
  const { text } = await proxied("/busy", 2_000);
  expect(text).not.toContain("keep-alive");
});

test.each<[string, boolean]>([
  ["", true],
  ["data: x\n\n", true],
  ["data: x\r\n\r\n", true],
  ["data: x\n", false],
  ["data: x", false],
])("atEventBoundary(%p) = %p", (text, ok) => expect(atEventBoundary(encoder.encode(text))).toBe(ok));

test("a stats observer that throws neither adds an error event after [DONE] nor keeps the lease", async () => {
  let released = false;
  const lease = { server: { url: `http://127.0.0.1:${upstream.port}`, gone: new AbortController().signal, pastFence: async () => undefined }, release: () => void (released = true) } as unknown as Lease;
  const onStats = () => {
    throw new TypeError("Value is not a valid number: NaN");
  };
  const res = await proxyToServer({ lease, model: "m", path: "/busy", body: new ArrayBuffer(0), clientSignal: new AbortController().signal, onStats, keepAliveMs: 2_000 });
  const text = await res.text();
  expect(text.endsWith("data: [DONE]\n\n")).toBe(true);
  expect(text).not.toContain("model_server_exited");
  expect(released).toBe(true);
});
