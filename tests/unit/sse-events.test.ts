/** The end-of-stream check: SSE read event by event, in any split, with a final event of any size; and through the proxy. */
import { afterAll, describe, expect, test } from "bun:test";
import type { Lease } from "../../pool/pool.ts";
import { proxyToServer } from "../../router/serving/proxy.ts";
import { emptySse, isFinalEvent, readSse, SSE_HEAD_CHARS, sseEndedCleanly } from "../../router/http/sse-events.ts";

const BIG = "x".repeat(8 * 1024);
const bigCompleted = `event: response.completed\ndata: {"type":"response.completed","response":{"output":[{"text":"${BIG}"}]}}\n\n`;

describe("sseEndedCleanly", () => {
  test.each<[string, string, boolean]>([
    ["chat [DONE]", 'data: {"a":1}\n\ndata: [DONE]\n\n', true],
    ["[DONE] with CRLF", 'data: {"a":1}\r\n\r\ndata: [DONE]\r\n\r\n', true],
    ["[DONE] with CR only", "data: [DONE]\r\r", true],
    ["response.completed", "event: response.completed\ndata: {}\n\n", true],
    ["response.failed", "event: response.failed\ndata: {}\n\n", true],
    ["response.incomplete", "event: response.incomplete\ndata: {}\n\n", true],
    ["error event", 'event: error\ndata: {"message":"x"}\n\n', true],
    ["message_stop", "event: message_stop\ndata: {}\n\n", true],
    ["type in data only", 'data: {"type":"response.completed","response":{}}\n\n', true],
    ["a >4 KiB response.completed", `event: response.created\ndata: {}\n\n${bigCompleted}`, true],
    ["a >4 KiB message_stop data", `event: message_stop\ndata: {"pad":"${BIG}"}\n\n`, true],
    ["keep-alive comment after the end", "data: [DONE]\n\n: keep-alive\n\n", true],
    ["chunk, no end", 'data: {"choices":[]}\n\n', false],
    ["nothing", "", false],
    ["final event cut before its blank line", "data: [DONE]\n", false],
    ["final event cut mid-data", bigCompleted.slice(0, 5000), false],
    ["an event after the final one", "event: response.completed\ndata: {}\n\nevent: response.output_text.delta\ndata: {}\n\n", false],
    ["[DONE] as part of longer data", "data: [DONE] or not\n\n", false],
    ["a name in the middle of the data", 'data: {"x":"event: message_stop"}\n\n', false],
    ["event line with no data", "event: message_stop\n\n", false],
  ])("%s", (_, text, ok) => expect(sseEndedCleanly(text)).toBe(ok));
});

describe("readSse in pieces", () => {
  const streams = [
    'data: {"a":1}\r\n\r\ndata: [DONE]\r\n\r\n',
    `event: ping\ndata: {}\n\n${bigCompleted}`,
    'event: content_block_stop\ndata: {}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n',
  ];
  test.each(streams.map((s, i) => [i, s] as const))("stream %d gives the same verdict at every split and one char at a time", (_, text) => {
    for (let cut = 0; cut <= text.length; cut += cut < 64 || text.length - cut < 64 ? 1 : 97) {
      expect(isFinalEvent(readSse(readSse(emptySse(), text.slice(0, cut)), text.slice(cut)).last)).toBe(true);
    }
    let s = emptySse();
    for (const ch of text) s = readSse(s, ch);
    expect(isFinalEvent(s.last)).toBe(true);
  });
  test("memory stays bounded: only heads of lines and data are kept", () => {
    let s = emptySse();
    for (let i = 0; i < 64; i++) s = readSse(s, `data: ${BIG}`);
    expect(s.partial.length).toBeLessThanOrEqual(SSE_HEAD_CHARS);
    s = readSse(s, "\n" + "data: more\n".repeat(1000));
    expect(s.data!.length).toBeLessThanOrEqual(SSE_HEAD_CHARS);
  });
});

/** A stand-in llama-server whose Responses stream ends with a final event over 4 KiB, sent whole or cut. */
const encoder = new TextEncoder();
const upstream = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch(req) {
    const whole = `event: response.created\ndata: {}\n\n${bigCompleted}`;
    const text = new URL(req.url).pathname === "/cut" ? whole.slice(0, whole.length - 100) : whole;
    // In 1000-byte pieces, so the final event arrives over several reads.
    const pieces = text.match(/[\s\S]{1,1000}/g) ?? [];
    const body = new ReadableStream<Uint8Array>({
      pull(c) {
        const next = pieces.shift();
        if (next === undefined) return c.close();
        c.enqueue(encoder.encode(next));
      },
    });
    return new Response(body, { headers: { "content-type": "text/event-stream" } });
  },
});
afterAll(() => upstream.stop(true));

async function proxied(path: string): Promise<string> {
  const lease = { server: { url: `http://127.0.0.1:${upstream.port}`, gone: new AbortController().signal, pastFence: async () => undefined }, release: () => undefined } as unknown as Lease;
  const res = await proxyToServer({ lease, model: "m", path, body: new ArrayBuffer(0), clientSignal: new AbortController().signal, onStats: () => undefined });
  return res.text();
}

test("the proxy passes a stream whose >4 KiB final event arrived whole, with no error event", async () => {
  const text = await proxied("/whole");
  expect(text.endsWith(bigCompleted)).toBe(true);
  expect(text).not.toContain("model_server_exited");
});

test("the proxy adds the error event to a stream cut inside its final event", async () => {
  expect(await proxied("/cut")).toContain("model_server_exited");
});
