import { describe, expect, test } from "bun:test";
import { CONSOLE_LIMITS, type ConsoleState, type LogLine, type TrafficSample } from "../../console/protocol.ts";
import { appendMessage, CHAT_MAX_MESSAGES, type ChatMessage } from "../../console/src/chat-stream.ts";
import { emptyView, keepLast, reduce, toAction, type ConsoleAction, type ConsoleView } from "../../console/src/store.ts";

const state = (at: number, self = "n1"): ConsoleState => ({ version: "0.1.0", self, at, nodes: [], models: [], trust: { state: "unanchored", roster: null, closed: false, refused: null } });
const sample = (at: number): TrafficSample => ({ at, models: {}, peers: {} });
const line = (seq: number): LogLine => ({ seq, at: seq, level: "info", msg: `line ${seq}`, fields: {} });
const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

const fold = (actions: ConsoleAction[], start: ConsoleView = emptyView()) => actions.reduce(reduce, start);

describe("console store", () => {
  test.each<[string, ConsoleAction[], (v: ConsoleView) => void]>([
    ["hello sets everything", [{ type: "hello", data: { state: state(1), traffic: [sample(1)], logs: [line(1)] } }], (v) => {
      expect(v.state?.at).toBe(1);
      expect(v.traffic.map((s) => s.at)).toEqual([1]);
      expect(v.logs.map((l) => l.seq)).toEqual([1]);
    }],
    ["a second hello (a reconnect) replaces, not appends", [
      { type: "hello", data: { state: state(1), traffic: [sample(1), sample(2)], logs: [line(1), line(2)] } },
      { type: "hello", data: { state: state(5, "n2"), traffic: [sample(5)], logs: [line(9)] } },
    ], (v) => {
      expect(v.state?.self).toBe("n2");
      expect(v.traffic.map((s) => s.at)).toEqual([5]);
      expect(v.logs.map((l) => l.seq)).toEqual([9]);
    }],
    ["state replaces the state whole and keeps the rest", [
      { type: "hello", data: { state: state(1), traffic: [sample(1)], logs: [line(1)] } },
      { type: "state", data: state(2, "n9") },
    ], (v) => {
      expect(v.state).toEqual(state(2, "n9"));
      expect(v.traffic).toHaveLength(1);
      expect(v.logs).toHaveLength(1);
    }],
    ["traffic appends newer samples and skips ones it has", [
      { type: "traffic", data: sample(1) },
      { type: "traffic", data: sample(3) },
      { type: "traffic", data: sample(3) },
      { type: "traffic", data: sample(2) },
      { type: "traffic", data: sample(4) },
    ], (v) => expect(v.traffic.map((s) => s.at)).toEqual([1, 3, 4])],
    ["log appends newer lines and skips ones it has", [
      { type: "log", data: line(1) },
      { type: "log", data: line(2) },
      { type: "log", data: line(2) },
      { type: "log", data: line(1) },
      { type: "log", data: line(3) },
    ], (v) => expect(v.logs.map((l) => l.seq)).toEqual([1, 2, 3])],
  ])("%s", (_name, actions, check) => {
    check(fold(actions));
  });

  test("however many samples and lines arrive, it keeps the newest within the limits", () => {
    const n = 5_000;
    const v = fold([...range(1, n).map((i): ConsoleAction => ({ type: "traffic", data: sample(i) })), ...range(1, n).map((i): ConsoleAction => ({ type: "log", data: line(i) }))]);
    expect(v.traffic).toHaveLength(CONSOLE_LIMITS.trafficSamples);
    expect(v.traffic.at(-1)?.at).toBe(n);
    expect(v.traffic[0]?.at).toBe(n - CONSOLE_LIMITS.trafficSamples + 1);
    expect(v.logs).toHaveLength(CONSOLE_LIMITS.logLines);
    expect(v.logs.at(-1)?.seq).toBe(n);
  });

  test("a hello with more than the limits is cut to the newest", () => {
    const v = reduce(emptyView(), { type: "hello", data: { state: state(1), traffic: range(1, 1000).map(sample), logs: range(1, 1000).map(line) } });
    expect(v.traffic).toHaveLength(CONSOLE_LIMITS.trafficSamples);
    expect(v.traffic[0]?.at).toBe(1000 - CONSOLE_LIMITS.trafficSamples + 1);
    expect(v.logs).toHaveLength(CONSOLE_LIMITS.logLines);
    expect(v.logs[0]?.seq).toBe(1000 - CONSOLE_LIMITS.logLines + 1);
  });

  test.each<[number[], number, number[]]>([
    [[], 3, []],
    [[1, 2], 3, [1, 2]],
    [[1, 2, 3], 3, [1, 2, 3]],
    [[1, 2, 3, 4, 5], 3, [3, 4, 5]],
  ])("keepLast(%j, %d) = %j", (items, max, expected) => {
    expect(keepLast(items, max)).toEqual(expected);
  });
});

describe("stream events to actions", () => {
  test.each<[string, string, string, string | null]>([
    ["a known event", "state", JSON.stringify(state(1)), "state"],
    ["hello", "hello", JSON.stringify({ state: state(1), traffic: [], logs: [] }), "hello"],
    ["an unknown name", "other", "{}", null],
    ["the default name", "message", "{}", null],
    ["data that is not JSON", "log", "{nope", null],
    ["JSON that is not an object", "log", "[1,2]", null],
    ["null", "traffic", "null", null],
  ])("%s", (_name, event, data, type) => {
    expect<string | null>(toAction(event, data)?.type ?? null).toBe(type);
  });
});

describe("chat transcript", () => {
  test("keeps at most the newest CHAT_MAX_MESSAGES", () => {
    let t: ChatMessage[] = [];
    for (let i = 0; i < 250; i++) t = appendMessage(t, { role: i % 2 ? "assistant" : "user", content: String(i) });
    expect(t).toHaveLength(CHAT_MAX_MESSAGES);
    expect(t.at(-1)?.content).toBe("249");
    expect(t[0]?.content).toBe(String(250 - CHAT_MAX_MESSAGES));
  });
});
