/**
 * A broken stream ends in its dialect's words, never inside an event: the boundary rule as a table,
 * the endings each SDK reads, and the guard over streams that finish, stop short, or fail.
 */
import { describe, expect, test } from "bun:test";
import { guardSse } from "../../router/http/sse-guard.ts";
import { brokenStreamEnding, endOfLastEvent } from "../../router/http/stream-endings.ts";
import { readSse, emptySse } from "../../router/http/sse-events.ts";

const encoder = new TextEncoder();

describe("endOfLastEvent", () => {
  test.each([
    ["nothing", "", 0],
    ["a line, no blank one", "data: x\n", 0],
    ["one event", "data: x\n\n", 9],
    ["one event and part of the next", "data: x\n\ndata: y", 9],
    ["two events", "data: x\n\ndata: y\n\n", 18],
    ["CRLF", "data: x\r\n\r\n", 11],
    ["CRLF then a CR: a blank line already (an LF after it is one more)", "data: x\r\n\r", 10],
    ["LF then CRLF", "data: x\n\r\n", 10],
    ["CRLF then LF", "data: x\r\n\n", 10],
    ["LF then CR", "data: x\n\r", 9],
    ["one CRLF only", "data: x\r\n", 0],
    ["CR only", "data: x\r\r", 9],
    ["an event line then data cut", "event: a\ndata: {\"t", 0],
  ])("%s", (_, text, end) => expect(endOfLastEvent(encoder.encode(text))).toBe(end));
});

describe("brokenStreamEnding: what each dialect's SDK reads as an error", () => {
  const last = (route: string) => readSse(emptySse(), brokenStreamEnding(route, "gone", "peer_gone")).last!;
  test("Anthropic messages: an `error` event with an error object", () => {
    const e = last("/v1/messages");
    expect(e.event).toBe("error");
    expect(JSON.parse(e.data)).toEqual({ type: "error", error: { type: "api_error", message: "gone" } });
  });
  test.each(["/v1/chat/completions", "/v1/completions"])("%s: a data line with an error object", (route) => {
    const e = last(route);
    expect(e.event).toBe("message");
    expect(JSON.parse(e.data)).toEqual({ error: { message: "gone", type: "service_unavailable", code: "peer_gone" } });
  });
});

/** A source that sends `chunks`, then ends or fails. */
function source(chunks: string[], then: "end" | "fail"): ReadableStream<Uint8Array> {
  let i = 0;
  return new ReadableStream<Uint8Array>({
    pull(controller) {
      if (i < chunks.length) return controller.enqueue(encoder.encode(chunks[i++]!));
      if (then === "end") controller.close();
      else controller.error(new Error("the peer went away"));
    },
  });
}

/** What a client reads through the guard, piece by piece. */
async function read(stream: ReadableStream<Uint8Array>): Promise<string[]> {
  const pieces: string[] = [];
  const decoder = new TextDecoder();
  for await (const piece of stream) pieces.push(decoder.decode(piece));
  return pieces;
}

const GONE = { message: "gone", code: "peer_gone" };

describe("guardSse", () => {
  test("a finished chat stream passes unchanged", async () => {
    const text = ['data: {"a":1}\n\n', "data: [DONE]\n\n"];
    expect((await read(guardSse(source(text, "end"), "/v1/chat/completions", GONE))).join("")).toBe(text.join(""));
  });

  test("an event split across reads reaches the client whole", async () => {
    const pieces = await read(guardSse(source(['data: {"a"', ':1}\n\ndata: [DO', "NE]\n\n"], "end"), "/v1/chat/completions", GONE));
    expect(pieces).toEqual(['data: {"a":1}\n\n', "data: [DONE]\n\n"]);
  });

  test("an Anthropic stream cut inside an event: the half event is dropped, then an error event", async () => {
    const cut = ["event: message_start\ndata: {}\n\n", "event: content_block_delta\ndata: {\"ty"];
    const text = (await read(guardSse(source(cut, "end"), "/v1/messages", GONE))).join("");
    expect(text).toBe(`event: message_start\ndata: {}\n\n${brokenStreamEnding("/v1/messages", "gone", "peer_gone")}`);
  });

  test("a source that fails ends with the error event, after what came whole", async () => {
    const text = (await read(guardSse(source(['data: {"a":1}\n\n', 'data: {"b"'], "fail"), "/v1/chat/completions", GONE))).join("");
    expect(text).toBe(`data: {"a":1}\n\n${brokenStreamEnding("/v1/chat/completions", "gone", "peer_gone")}`);
  });

  test("a stream another node already ended with its error gets no second one", async () => {
    const ended = brokenStreamEnding("/v1/chat/completions", "exited", "model_server_exited");
    expect((await read(guardSse(source(['data: {"a":1}\n\n', ended], "end"), "/v1/chat/completions", GONE))).join("")).toBe(`data: {"a":1}\n\n${ended}`);
  });

  test("an Anthropic stream ended with its error event gets no second one", async () => {
    const ended = brokenStreamEnding("/v1/messages", "exited", "model_server_exited");
    expect((await read(guardSse(source([ended], "end"), "/v1/messages", GONE))).join("")).toBe(ended);
  });

  test("keep-alive comments pass between events", async () => {
    expect((await read(guardSse(source([": keep-alive\n\n", "data: [DONE]\n\n"], "end"), "/v1/completions", GONE))).join("")).toBe(": keep-alive\n\ndata: [DONE]\n\n");
  });
});

describe("guardSse over many pieces and older nodes", () => {
  test("one event in many small pieces passes whole, scanned piece by piece", async () => {
    const data = "x".repeat(200_000);
    const pieces = [...`data: {"a":"${data}"}\n\ndata: [DONE]\n\n`.matchAll(/[\s\S]{1,7}/g)].map((m) => m[0]);
    const text = (await read(guardSse(source(pieces, "end"), "/v1/chat/completions", GONE))).join("");
    expect(text).toBe(`data: {"a":"${data}"}\n\ndata: [DONE]\n\n`);
  });

  test("a blank line split between pieces ends the event", async () => {
    expect(await read(guardSse(source(["data: {}\r\n", "\r", "\ndata: [DONE]\n", "\n"], "end"), "/v1/completions", GONE))).toEqual(["data: {}\r\n\r", "\ndata: [DONE]\n\n"]);
  });

  test("an Anthropic stream an older node ended with a bare error data line still gets its error event", async () => {
    const older = 'data: {"error":{"message":"exited","type":"service_unavailable","code":"model_server_exited"}}\n\n';
    const text = (await read(guardSse(source(["event: message_start\ndata: {}\n\n", older], "end"), "/v1/messages", GONE))).join("");
    expect(text).toEndWith(brokenStreamEnding("/v1/messages", "gone", "peer_gone"));
  });
});

describe("guardSse: only the last event decides, whatever came before it and however it was cut", () => {
  const ERR = brokenStreamEnding("/v1/chat/completions", "gone", "peer_gone");
  test.each([
    ["events, then [DONE]", ['data: {"a":1}\n\n', 'data: {"b":2}\n\n', "data: [DONE]\n\n"], false],
    ["[DONE], then a keep-alive comment", ['data: {"a":1}\n\n', "data: [DONE]\n\n", ": keep-alive\n\n"], false],
    ["an event, then a keep-alive comment: no final event", ['data: {"a":1}\n\n', ": keep-alive\n\n"], true],
    ["[DONE] before more events", ["data: [DONE]\n\n", 'data: {"a":1}\n\n', 'data: {"b":2}\n\n'], true],
    ["[DONE] in the same read as events before it", ['data: {"a":1}\n\ndata: {"b":2}\n\ndata: [DONE]\n\n'], false],
    ["[DONE] in the same read as an event after it", ['data: {"a":1}\n\n', 'data: [DONE]\n\ndata: {"b":2}\n\n'], true],
    ["CR line ends", ["data: {}\r\r", "data: [DONE]\r\r"], false],
    ["a CRLF blank line split before its LF", ["data: {}\r\n\r", "\ndata: [DONE]\r\n\r", "\n"], false],
    ["an event named before its data", ['data: {"a":1}\n\n', "event: x\ndata: [DONE]\n\n"], false],
    ["an event with no data after [DONE]: not dispatched", ["data: [DONE]\n\n", "event: x\n\n"], false],
    ["a data line without a colon after [DONE]: an empty event", ["data: [DONE]\n\n", "data\n\n"], true],
  ])("%s", async (_, pieces, broken) => {
    const text = (await read(guardSse(source(pieces, "end"), "/v1/chat/completions", GONE))).join("");
    expect(text).toBe(pieces.join("") + (broken ? ERR : ""));
  });
});
