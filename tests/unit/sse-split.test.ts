/**
 * Splitting an SSE stream into whole events as its pieces arrive: where events end with LF, CRLF
 * and CR line ends (a CR split from its LF included), what each event's fields are, that each keeps
 * its exact text, and the bound on an event still arriving.
 */
import { describe, expect, test } from "bun:test";
import { readEvent, splitSse, type WholeSseEvent } from "../../router/http/sse-split.ts";

/** `pieces` fed one after another, each call given what the previous one held. */
function splitAll(pieces: string[], maxHeld = Number.POSITIVE_INFINITY): { events: WholeSseEvent[]; held: string | undefined } {
  let held: string | undefined = "";
  const events: WholeSseEvent[] = [];
  for (const piece of pieces) {
    if (held === undefined) break;
    const split = splitSse(held, piece, maxHeld);
    events.push(...split.events);
    held = split.held;
  }
  return { events, held };
}

const ev = (raw: string, data: string | undefined, event = "message", comment = false): WholeSseEvent => ({ event, data, comment, raw });

describe("splitSse", () => {
  test.each<[string, string[], WholeSseEvent[], string]>([
    ["nothing", [""], [], ""],
    ["a line, no blank one", ["data: x\n"], [], "data: x\n"],
    ["one event", ["data: x\n\n"], [ev("data: x\n\n", "x")], ""],
    ["two events and part of a third", ["data: a\n\nevent: e\ndata: b\n\ndata: c"], [ev("data: a\n\n", "a"), ev("event: e\ndata: b\n\n", "b", "e")], "data: c"],
    ["an event split across pieces", ['data: {"a"', ":1}\n", "\ndata: x"], [ev('data: {"a":1}\n\n', '{"a":1}')], "data: x"],
    ["CRLF", ["data: x\r\n\r\ndata: y"], [ev("data: x\r\n\r\n", "x")], "data: y"],
    ["CRLF split between its halves", ["data: 1\r\n\r", "\ndata: 2\r\n\r\n"], [ev("data: 1\r\n\r\n", "1"), ev("data: 2\r\n\r\n", "2")], ""],
    ["a CR at the end waits for its LF", ["data: x\r\n\r"], [], "data: x\r\n\r"],
    ["CR line ends", ["data: x\r\revent: e\rdata: y\r\r", "data: z"], [ev("data: x\r\r", "x"), ev("event: e\rdata: y\r\r", "y", "e")], "data: z"],
    ["a CR ending a piece, no LF after it", ["data: x\r", "\rdata: y\r", "data: z\r\r"], [ev("data: x\r\r", "x")], "data: y\rdata: z\r\r"],
    ["a blank CR line ending a piece, then its LF", ["data: x\r\r", "\n"], [ev("data: x\r\r\n", "x")], ""],
    ["a blank CR line ending a piece, then another line", ["data: x\r\r", "data: y\n\n"], [ev("data: x\r\r", "x"), ev("data: y\n\n", "y")], ""],
    ["a comment is an event of its own", [": keep-alive\n\ndata: x\n\n"], [ev(": keep-alive\n\n", undefined, "message", true), ev("data: x\n\n", "x")], ""],
    ["a comment beside data", [": note\ndata: x\n\n"], [ev(": note\ndata: x\n\n", "x", "message", true)], ""],
    ["data over lines, joined by LF", ["data: a\ndata:b\ndata\ndata:  c\n\n"], [ev("data: a\ndata:b\ndata\ndata:  c\n\n", "a\nb\n\n c")], ""],
    ["an event without data", ["event: ping\nid: 3\n\n"], [ev("event: ping\nid: 3\n\n", undefined, "ping")], ""],
    ["other fields skipped, the last event name kept", ["event: a\nid: 1\nretry: 5\nevent: b\ndata: 1\n\n"], [ev("event: a\nid: 1\nretry: 5\nevent: b\ndata: 1\n\n", "1", "b")], ""],
    ["a blank line with no event before it", ["\ndata: x\n\n"], [ev("\n", undefined), ev("data: x\n\n", "x")], ""],
    ["a blank line after an event", ["data: 1\n\n\ndata: 2"], [ev("data: 1\n\n", "1"), ev("\n", undefined)], "data: 2"],
    ["one character at a time", [..."data: 1\r\n\r\n: k\r\rdata: 2\n\n"], [ev("data: 1\r\n\r\n", "1"), ev(": k\r\r", undefined, "message", true), ev("data: 2\n\n", "2")], ""],
  ])("%s", (_, pieces, events, held) => expect(splitAll(pieces)).toEqual({ events, held }));

  test("an event still arriving past the bound: no held text, the whole events before it kept", () => {
    expect(splitAll(["data: 1\n\ndata: 123456"], 8)).toEqual({ events: [ev("data: 1\n\n", "1")], held: undefined });
    expect(splitAll(["data: 1234", "56"], 8).held).toBeUndefined();
    expect(splitAll(["data: 12", "\n\n"], 8)).toEqual({ events: [ev("data: 12\n\n", "12")], held: "" });
  });

  test("a long event in many pieces takes time linear in its length", () => {
    // Rescanning or copying the held text for each piece would take seconds here (16 MiB in 4 KiB pieces).
    const piece = "x".repeat(4 * 1024);
    const started = performance.now();
    let held = "data: ";
    for (let i = 0; i < 4096; i++) held = splitSse(held, piece, Number.POSITIVE_INFINITY).held!;
    const split = splitSse(held, "\n\n", Number.POSITIVE_INFINITY);
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(split.events.map((e) => e.data?.length)).toEqual([4096 * piece.length]);
  });
});

describe("readEvent", () => {
  test.each<[string, string, WholeSseEvent]>([
    ["a name and data", 'event: message_delta\ndata: {"n":1}\n\n', ev('event: message_delta\ndata: {"n":1}\n\n', '{"n":1}', "message_delta")],
    ["one space after the colon dropped, no more", "data:  x\r\n\r\n", ev("data:  x\r\n\r\n", " x")],
    ["an empty event name stays empty", "event:\ndata: x\n\n", ev("event:\ndata: x\n\n", "x", "")],
    ["a comment naming a field is only a comment", ":event: x\n:data: y\n\n", ev(":event: x\n:data: y\n\n", undefined, "message", true)],
  ])("%s", (_, raw, event) => expect(readEvent(raw)).toEqual(event));
});
