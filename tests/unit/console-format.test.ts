import { describe, expect, test } from "bun:test";
import { parseChunk } from "../../console/src/chat-stream.ts";
import { DASH, formatAgo, formatBytes, formatByteRate, formatCompact, formatDuration, formatMs, formatPercent, formatRtt, formatRate, shortId } from "../../console/src/format.ts";
import { atLeast, fieldsText, filterLogs } from "../../console/src/log-filter.ts";
import { idlePull, pullEvent } from "../../console/src/pull-progress.ts";
import { errorText } from "../../console/src/error-text.ts";
import type { LogLine } from "../../console/protocol.ts";

describe("formatting", () => {
  test.each<[number | null | undefined, string]>([
    [0, "0 B"],
    [1023, "1023 B"],
    [1024, "1.0 KB"],
    [1536, "1.5 KB"],
    [10 * 1024, "10 KB"],
    [5.5 * 2 ** 30, "5.5 GB"],
    [24 * 2 ** 30, "24 GB"],
    [3 * 2 ** 50, "3.0 PB"],
    [null, DASH],
    [undefined, DASH],
    [-1, DASH],
    [Number.NaN, DASH],
  ])("formatBytes(%p) = %s", (v, out) => {
    expect(formatBytes(v)).toBe(out);
  });

  test.each<[number | null, string]>([
    [0, "0s"],
    [59.9, "59s"],
    [65, "1m 05s"],
    [3600 + 125, "1h 02m"],
    [86400 * 4 + 3 * 3600, "4d 3h"],
    [null, DASH],
    [-3, DASH],
  ])("formatDuration(%p) = %s", (v, out) => {
    expect(formatDuration(v)).toBe(out);
  });

  test.each<[number | null, string]>([
    [0.25, "250 µs"],
    [3.14159, "3.1 ms"],
    [340.4, "340 ms"],
    [1250, "1.25 s"],
    [null, DASH],
  ])("formatMs(%p) = %s", (v, out) => {
    expect(formatMs(v)).toBe(out);
  });

  test.each<[number | null, string]>([
    [0, "< 1 ms"],
    [1, "1.0 ms"],
    [null, DASH],
  ])("formatRtt(%p) = %s (QUIC's whole milliseconds)", (v, out) => {
    expect(formatRtt(v)).toBe(out);
  });

  test.each<[() => string, string]>([
    [() => formatAgo(500), "just now"],
    [() => formatAgo(14_000), "14s ago"],
    [() => formatAgo(null), DASH],
    [() => formatRate(0, "/s"), "0 /s"],
    [() => formatRate(1.234, "/s"), "1.23 /s"],
    [() => formatRate(12.34, "tok/s"), "12.3 tok/s"],
    [() => formatRate(1234.5, "tok/s"), "1235 tok/s"],
    [() => formatRate(null, "/s"), DASH],
    [() => formatByteRate(2048), "2.0 KB/s"],
    [() => formatByteRate(null), DASH],
    [() => formatPercent(0.6), "60%"],
    [() => formatCompact(0), "0"],
    [() => formatCompact(0.015), "0.015"],
    [() => formatCompact(2.5), "2.5"],
    [() => formatCompact(250), "250"],
    [() => formatCompact(1250), "1.3k"],
    [() => formatCompact(3.4e6), "3.4M"],
    [() => shortId("a1b2c3d4e5f60718"), "a1b2c3d4e5"],
  ])("%#: %s", (f, out) => {
    expect(f()).toBe(out);
  });
});

describe("error messages of the node", () => {
  test.each<[string, number, string, string]>([
    ["OpenAI shape", 400, JSON.stringify({ error: { message: "model \"x\" is not in the catalog", type: "invalid_request_error" } }), 'model "x" is not in the catalog'],
    ["Lemonade shape", 507, JSON.stringify({ status: "error", message: "out of memory" }), "out of memory"],
    ["pull error shape", 500, JSON.stringify({ error: "no such repo" }), "no such repo"],
    ["plain text", 502, "bad gateway", "bad gateway"],
    ["empty body", 503, "", "HTTP 503 Service Unavailable"],
  ])("%s", (_name, status, body, out) => {
    expect(errorText(status, status === 503 ? "Service Unavailable" : "", body)).toBe(out);
  });
});

describe("chat stream chunks", () => {
  test.each<[string, string, Partial<ReturnType<typeof parseChunk>>]>([
    ["the end", "[DONE]", { done: true }],
    ["a token", JSON.stringify({ choices: [{ delta: { content: "Hi" } }] }), { content: "Hi" }],
    ["reasoning text", JSON.stringify({ choices: [{ delta: { reasoning_content: "hmm" } }] }), { reasoning: "hmm", content: "" }],
    ["llama-server's timings", JSON.stringify({ choices: [{ delta: {} }], timings: { predicted_per_second: 42.5, predicted_n: 10 } }), { timings: { predicted_per_second: 42.5, predicted_n: 10 } }],
    ["usage", JSON.stringify({ choices: [], usage: { prompt_tokens: 3, completion_tokens: 7 } }), { usage: { prompt_tokens: 3, completion_tokens: 7 } }],
    ["an error", JSON.stringify({ error: { message: "context full" } }), { error: "context full" }],
    ["not JSON", "{oops", { content: "", done: false }],
  ])("%s", (_name, data, expected) => {
    expect(parseChunk(data)).toMatchObject(expected);
  });
});

describe("log filter", () => {
  const line = (seq: number, level: LogLine["level"], msg: string, fields: LogLine["fields"] = {}): LogLine => ({ seq, at: seq, level, msg, fields });
  const lines = [line(1, "debug", "tick"), line(2, "info", "peer joined", { peer: "abc" }), line(3, "warn", "slow"), line(4, "error", "crashed", { code: 1 })];

  test.each<[LogLine["level"], string, number[]]>([
    ["debug", "", [1, 2, 3, 4]],
    ["info", "", [2, 3, 4]],
    ["warn", "", [3, 4]],
    ["error", "", [4]],
    ["debug", "PEER", [2]],
    ["debug", "abc", [2]],
    ["warn", "peer", []],
  ])("at least %s, text %j", (min, text, seqs) => {
    expect(filterLogs(lines, min, text).map((l) => l.seq)).toEqual(seqs);
  });

  test("levels order and fields text", () => {
    expect(atLeast("error", "warn")).toBe(true);
    expect(atLeast("debug", "info")).toBe(false);
    expect(fieldsText({ a: 1, b: "two words", c: null, d: true })).toBe('a=1 b="two words" c=null d=true');
  });
});

describe("pull progress", () => {
  const progress = (over: Record<string, unknown>) => JSON.stringify({ file: "m.gguf", file_index: 1, total_files: 2, bytes_downloaded: 50, bytes_total: 100, percent: 50, ...over });
  test.each<[string, [string, string][], { phase: string; fraction: number | null; message: RegExp }]>([
    ["progress of the whole pull", [["progress", progress({ total_download_size: 400, cumulative_bytes_downloaded: 100 })]], { phase: "running", fraction: 0.25, message: /m\.gguf \(file 1 of 2\)/ }],
    ["progress of the file when the total is not said", [["progress", progress({})]], { phase: "running", fraction: 0.5, message: /50 B of 100 B/ }],
    ["complete", [["progress", progress({})], ["complete", JSON.stringify({ model_name: "tiny", total_download_size: 2048 })]], { phase: "done", fraction: 1, message: /Pulled tiny \(2\.0 KB\)/ }],
    ["already had it", [["complete", JSON.stringify({ model_name: "tiny", status: "ok" })]], { phase: "done", fraction: 1, message: /already here/ }],
    ["error keeps the last fraction", [["progress", progress({})], ["error", JSON.stringify({ error: "disk full", code: "x" })]], { phase: "failed", fraction: 0.5, message: /^disk full$/ }],
  ])("%s", (_name, events, expected) => {
    const v = events.reduce((acc, [e, d]) => pullEvent(acc, e, d), idlePull());
    expect<string>(v.phase).toBe(expected.phase);
    expect(v.fraction).toBe(expected.fraction);
    expect(v.message).toMatch(expected.message);
  });
});
