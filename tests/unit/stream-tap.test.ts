/**
 * The stream tap: its decisions as tables (what each event does in each phase, which stall is
 * due), then real streams through it: sequences of chunks, ends, failures, cancels and stalls, and
 * the hook calls they make; hooks added to a tap's output join that tap.
 */
import { describe, expect, test } from "bun:test";
import { stallDue, tapStep, tapStream, tappedAnswer, type TapEvent, type TapHooks, type TapPhase } from "../../router/http/stream-tap.ts";
import { keepLast, TailKeeper } from "../../router/serving/passing-stats.ts";

describe("tapStep", () => {
  test.each<[TapPhase, TapEvent, TapPhase, string[]]>([
    ["open", "chunk", "open", ["chunkHooks", "pass"]],
    ["open", "quiet", "open", ["stallHooks", "pass"]],
    ["open", "end", "ended", ["stopTimer", "endHooks", "pass", "finish"]],
    ["open", "fail", "ended", ["stopTimer", "endHooks", "pass", "finish"]],
    ["open", "cancel", "cancelled", ["stopTimer", "cancelHooks", "cancelSource"]],
    ["open", "unread", "cancelled", ["stopTimer", "stallHooks", "cancelHooks", "cancelSource", "failRead"]],
    ["ended", "cancel", "ended", []],
    ["ended", "chunk", "ended", []],
    ["ended", "quiet", "ended", []],
    ["cancelled", "end", "cancelled", []],
    ["cancelled", "fail", "cancelled", []],
    ["cancelled", "unread", "cancelled", []],
  ])("%s + %s -> %s %j", (phase, event, next, actions) => expect(tapStep(phase, event)).toEqual({ phase: next, actions: actions as never }));
});

describe("stallDue", () => {
  test.each<[string, { now: number; lastOut: number; reading: boolean }, number | undefined, number | undefined, string | undefined]>([
    ["client reading, source quiet long enough: a keep-alive", { now: 100, lastOut: 0, reading: true }, 90, undefined, "quiet"],
    ["client reading, source quiet not long enough", { now: 80, lastOut: 0, reading: true }, 90, undefined, undefined],
    ["no keep-alive asked for", { now: 1000, lastOut: 0, reading: true }, undefined, 50, undefined],
    ["a chunk unread past the client's limit: cut", { now: 60, lastOut: 0, reading: false }, 90, 50, "unread"],
    ["a chunk unread within the limit", { now: 40, lastOut: 0, reading: false }, 90, 50, undefined],
    ["unread but nobody watches the client", { now: 1000, lastOut: 0, reading: false }, 90, undefined, undefined],
  ])("%s", (_, clock, sourceMs, clientMs, want) => expect(stallDue(clock, sourceMs, clientMs)).toBe(want as never));
});

describe("TailKeeper keeps what keepLast would", () => {
  const enc = (s: string) => new TextEncoder().encode(s);
  test.each<[string[], number]>([
    [[], 4],
    [["ab"], 4],
    [["ab", "cd", "ef"], 4],
    [["abcdefgh"], 4],
    [["a", "bcdefgh", "i"], 3],
    [["abc", "", "de"], 10],
  ])("%j, max %d", (chunks, max) => {
    const keeper = new TailKeeper(max);
    let kept: Uint8Array = new Uint8Array(0);
    for (const c of chunks) {
      keeper.push(enc(c));
      kept = keepLast(kept, enc(c), max);
    }
    expect([...keeper.bytes()]).toEqual([...kept]);
    expect([...keeper.last(2)]).toEqual([...kept.subarray(Math.max(0, kept.length - 2))]);
  });
});

/** A source that sends `chunks` (each after `gapMs`), then ends or fails; tells when it is cancelled. */
function source(chunks: string[], then: "end" | "fail", gapMs = 0) {
  const enc = new TextEncoder();
  const seen = { cancelled: undefined as unknown };
  let i = 0;
  const stream = new ReadableStream<Uint8Array>({
    async pull(c) {
      if (gapMs) await Bun.sleep(gapMs);
      if (i < chunks.length) return c.enqueue(enc.encode(chunks[i++]!));
      if (then === "end") c.close();
      else c.error(new Error("source failed"));
    },
    cancel(reason) {
      seen.cancelled = reason;
    },
  });
  return { stream, seen };
}

/** Hooks that write what they are told into `calls`, named `name`. */
function recorder(name: string, calls: string[], extra: Partial<TapHooks> = {}): TapHooks {
  return {
    onChunk: (c) => {
      calls.push(`${name}.chunk ${new TextDecoder().decode(c)}`);
      return extra.onChunk?.(c);
    },
    onEnd: (end) => {
      calls.push(`${name}.end ${end.done ? "done" : "failed"}`);
      return extra.onEnd?.(end);
    },
    onCancel: () => void calls.push(`${name}.cancel`),
    ...(extra.onStall ? { onStall: extra.onStall } : {}),
  };
}

const text = (s: ReadableStream<Uint8Array>) => new Response(s).text();

describe("sequences through a tap", () => {
  test("chunks then the end: each hook sees every chunk in order, then the end once", async () => {
    const calls: string[] = [];
    const { stream } = source(["a", "b"], "end");
    const out = tapStream(tapStream(stream, recorder("x", calls)), recorder("y", calls));
    expect(await text(out)).toBe("ab");
    expect(calls).toEqual(["x.chunk a", "y.chunk a", "x.chunk b", "y.chunk b", "x.end done", "y.end done"]);
  });

  test("a failure: every hook told, the read fails", async () => {
    const calls: string[] = [];
    const { stream } = source(["a"], "fail");
    const out = tapStream(stream, recorder("x", calls));
    await expect(text(out)).rejects.toThrow("source failed");
    expect(calls).toEqual(["x.chunk a", "x.end failed"]);
  });

  test("a hook that turns a failure into an end with last bytes: the later hooks see those and a clean end", async () => {
    const calls: string[] = [];
    const { stream } = source(["a"], "fail");
    const first = tapStream(stream, recorder("x", calls, { onEnd: () => ({ add: new TextEncoder().encode("!"), end: { done: true } }) }));
    const out = tapStream(first, recorder("y", calls));
    expect(await text(out)).toBe("a!");
    expect(calls).toEqual(["x.chunk a", "y.chunk a", "x.end failed", "y.chunk !", "y.end done"]);
  });

  test("a hook that holds a chunk back: the pull reads on until something passes", async () => {
    const { stream } = source(["a", "b", "c", "d"], "end");
    let held = "";
    const pairs: TapHooks = {
      onChunk: (c) => {
        held += new TextDecoder().decode(c);
        if (held.length < 2) return [];
        const out = new TextEncoder().encode(held);
        held = "";
        return out;
      },
    };
    const pieces: string[] = [];
    for await (const p of tapStream(stream, pairs)) pieces.push(new TextDecoder().decode(p));
    expect(pieces).toEqual(["ab", "cd"]);
  });

  test("the client cancels: every hook's cancel, the source cancelled, no end", async () => {
    const calls: string[] = [];
    const { stream, seen } = source(["a", "b", "c"], "end");
    const out = tapStream(tapStream(stream, recorder("x", calls)), recorder("y", calls));
    const reader = out.getReader();
    await reader.read();
    await reader.cancel(new Error("bye"));
    expect(calls).toEqual(["x.chunk a", "y.chunk a", "x.cancel", "y.cancel"]);
    expect(String(seen.cancelled)).toContain("bye");
  });

  test("a client that stops reading is cut: stall told, cancels told, source cancelled, its read fails", async () => {
    const calls: string[] = [];
    const { stream, seen } = source(["a", "b"], "end");
    const out = tapStream(stream, recorder("x", calls, { onStall: { side: "client", ms: 30, call: () => void calls.push("x.stall") } }));
    const reader = out.getReader();
    await reader.read();
    await Bun.sleep(120);
    expect(calls).toEqual(["x.chunk a", "x.stall", "x.cancel"]);
    expect(String(seen.cancelled)).toContain("stopped reading");
    await expect(reader.read()).rejects.toThrow("read nothing for 30 ms");
  });

  test("a quiet source: the stall's bytes go out through the hooks after it", async () => {
    const calls: string[] = [];
    const { stream } = source(["a\n\n", "b\n\n"], "end", 150);
    const first = tapStream(stream, { onStall: { side: "source", ms: 40, call: () => new TextEncoder().encode(":k\n\n") } });
    const out = tapStream(first, recorder("y", calls));
    const all = await text(out);
    expect(all).toMatch(/^(:k\n\n)+a\n\n(:k\n\n)+b\n\n(:k\n\n)*$/);
    expect(calls.filter((c) => c.startsWith("y.chunk :k")).length).toBeGreaterThan(0);
  });

  test("hooks on a tap's unread output join that tap: the same stream, the same answer", () => {
    const { stream } = source(["a"], "end");
    const out = tapStream(stream, {});
    expect(tapStream(out, {})).toBe(out);
    const res = new Response(out, { headers: { "x-a": "1" } });
    expect(tappedAnswer(res, {})).toBe(res);
  });

  test("a stream that is no tap's output gets a tap of its own", () => {
    const { stream } = source(["a"], "end");
    expect(tapStream(stream, {})).not.toBe(stream);
  });
});

test("a tap's output cancelled before anyone read it takes no more hooks: a new tap tells them its end", async () => {
  const { stream } = source(["a"], "end");
  const out = tapStream(stream, {});
  await out.cancel();
  const calls: string[] = [];
  const again = tapStream(out, recorder("late", calls));
  expect(again).not.toBe(out);
  await text(again);
  expect(calls).toEqual(["late.end done"]);
});
