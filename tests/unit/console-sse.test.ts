import { describe, expect, test } from "bun:test";
import { readSseBody, SSE_MAX_EVENT_CHARS, SseParser, type SseMessage } from "../../console/src/sse.ts";

/** Feeds `chunks` one after another and returns every event, then the ones the stream's end adds. */
function parse(chunks: (string | Uint8Array)[]): SseMessage[] {
  const p = new SseParser();
  return [...chunks.flatMap((c) => p.push(c)), ...p.end()];
}

const bytes = (s: string) => new TextEncoder().encode(s);

describe("SSE parser: whole events", () => {
  test.each<[string, string[], SseMessage[]]>([
    ["one named event", ["event: state\ndata: {\"a\":1}\n\n"], [{ event: "state", data: '{"a":1}' }]],
    ["no event field is a message", ["data: x\n\n"], [{ event: "message", data: "x" }]],
    ["data lines join with a newline", ["data: a\ndata: b\n\n"], [{ event: "message", data: "a\nb" }]],
    ["no space after the colon", ["event:log\ndata:x\n\n"], [{ event: "log", data: "x" }]],
    ["only the first space is dropped", ["data:  two\n\n"], [{ event: "message", data: " two" }]],
    ["a field without a colon", ["data\n\n"], [{ event: "message", data: "" }]],
    ["comments are skipped", [": keep-alive\n\n: x\ndata: y\n\n"], [{ event: "message", data: "y" }]],
    ["an event without data is not dispatched", ["event: state\n\n"], []],
    ["unknown fields are ignored", ["id: 7\nretry: 10\ndata: z\n\n"], [{ event: "message", data: "z" }]],
    ["the event name does not leak to the next", ["event: a\ndata: 1\n\ndata: 2\n\n"], [{ event: "a", data: "1" }, { event: "message", data: "2" }]],
    ["CRLF line ends", ["event: a\r\ndata: 1\r\n\r\n"], [{ event: "a", data: "1" }]],
    ["CR line ends", ["event: a\rdata: 1\r\r"], [{ event: "a", data: "1" }]],
    ["an unfinished last event is dropped at the end", ["data: 1\n\ndata: 2\n"], [{ event: "message", data: "1" }]],
  ])("%s", (_name, chunks, expected) => {
    expect(parse(chunks)).toEqual(expected);
  });
});

describe("SSE parser: chunks split anywhere", () => {
  const stream = 'event: hello\r\ndata: {"t":"naïve ☃ 🚀"}\r\n\r\n: keep-alive\n\nevent: log\ndata: x\n\n';
  const expected = [
    { event: "hello", data: '{"t":"naïve ☃ 🚀"}' },
    { event: "log", data: "x" },
  ];

  test("every split point of the text", () => {
    for (let i = 0; i <= stream.length; i++) expect(parse([stream.slice(0, i), stream.slice(i)])).toEqual(expected);
  });

  test("every split point of the bytes, inside multi-byte characters too", () => {
    const b = bytes(stream);
    for (let i = 0; i <= b.length; i++) expect(parse([b.slice(0, i), b.slice(i)])).toEqual(expected);
  });

  test("one byte at a time", () => {
    expect(parse([...bytes(stream)].map((x) => Uint8Array.of(x)))).toEqual(expected);
  });

  test.each([
    ["CR then LF in the next chunk is one line end", ["data: 1\r", "\n\r\n"], [{ event: "message", data: "1" }]],
    ["CR at a chunk's end then a new line", ["data: 1\r", "\r"], [{ event: "message", data: "1" }]],
    ["a line split mid-field", ["ev", "ent: a\nda", "ta: 1\n", "\n"], [{ event: "a", data: "1" }]],
  ] as [string, string[], SseMessage[]][])("%s", (_name, chunks, expected) => {
    expect(parse(chunks)).toEqual(expected);
  });
});

describe("SSE parser: bounds", () => {
  test("an event over the limit is dropped, in one piece or many, and the next one still comes", () => {
    const big = "x".repeat(SSE_MAX_EVENT_CHARS + 10);
    expect(parse([`data: ${big}\n\ndata: after\n\n`])).toEqual([{ event: "message", data: "after" }]);
    const pieces = Array.from({ length: 40 }, () => "x".repeat(SSE_MAX_EVENT_CHARS / 32));
    expect(parse(["data: ", ...pieces, "\n\n", "data: after\n\n"])).toEqual([{ event: "message", data: "after" }]);
  });
});

describe("SSE body reader", () => {
  test("reads a response body to its end and hears each chunk", async () => {
    const chunks = ["event: a\nda", "ta: 1\n\n: ping\n\n", "data: 2\n\n"];
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        for (const ch of chunks) c.enqueue(bytes(ch));
        c.close();
      },
    });
    const got: SseMessage[] = [];
    let activity = 0;
    await readSseBody(body, (m) => got.push(m), () => activity++);
    expect(got).toEqual([
      { event: "a", data: "1" },
      { event: "message", data: "2" },
    ]);
    expect(activity).toBe(chunks.length);
  });
});
