import { describe, expect, test } from "bun:test";
import type { PullProgress } from "../../models/pull.ts";
import { readSseEvents } from "../../commands/pull.ts";
import {
  coalesce,
  lemonadeComplete,
  lemonadeErrorEvent,
  lemonadeProgress,
  ndjsonLine,
  ollamaPullError,
  ollamaPullProgress,
  ollamaPullStart,
  ollamaPullSuccess,
  sseEvent,
} from "../../router/dialects/pull-events.ts";

const p = (file: string, bytes: number, over: Partial<PullProgress> = {}): PullProgress => ({
  file,
  fileIndex: 1,
  fileCount: 2,
  bytes,
  total: 1000,
  allBytes: bytes,
  allTotal: 1500,
  ...over,
});

describe("Ollama's NDJSON pull lines", () => {
  test.each([
    ["the start", ollamaPullStart(), '{"status":"pulling manifest"}\n'],
    ["a file's progress", ollamaPullProgress(p("repo-Q8_0.gguf", 250)), '{"status":"pulling repo-Q8_0.gguf","digest":"repo-Q8_0.gguf","total":1000,"completed":250}\n'],
    ["success", ollamaPullSuccess(), '{"status":"success"}\n'],
    ["a failure, as the last line", ollamaPullError('quant "Q9" not found; the repo has Q4_K_M, Q8_0'), '{"error":"quant \\"Q9\\" not found; the repo has Q4_K_M, Q8_0"}\n'],
  ])("%s", (_, line, text) => {
    expect(ndjsonLine(line)).toBe(text);
    // One JSON object per line, as the ollama client splits them.
    expect(JSON.parse(text.trimEnd())).toEqual(line);
  });
});

describe("Lemonade's pull events", () => {
  test("progress: the file (counted from 1), its bytes and the whole pull's", () => {
    expect(lemonadeProgress(p("b.gguf", 250, { fileIndex: 2, allBytes: 1250 }))).toEqual({
      event: "progress",
      data: {
        file: "b.gguf",
        file_index: 2,
        total_files: 2,
        bytes_downloaded: 250,
        bytes_previously_downloaded: 0,
        bytes_total: 1000,
        percent: 25,
        total_download_size: 1500,
        cumulative_bytes_downloaded: 1250,
      },
    });
  });
  test("a file of unknown size is at 0%", () => {
    expect(lemonadeProgress(p("a.gguf", 5, { total: 0 })).data.percent).toBe(0);
  });
  test("complete: the model's name and size; status ok when nothing was downloaded", () => {
    const pulled = { name: "hf.co/org/repo:Q8_0", files: ["/m/a.gguf", "/m/mmproj.gguf"], sizeBytes: 1500, alreadyHad: false };
    expect(lemonadeComplete(pulled)).toEqual({
      event: "complete",
      data: { file: "", file_index: 2, total_files: 2, bytes_downloaded: 0, bytes_total: 0, percent: 100, total_download_size: 1500, model_name: "hf.co/org/repo:Q8_0" },
    });
    expect(lemonadeComplete({ ...pulled, alreadyHad: true }).data.status).toBe("ok");
  });
  test("error: its data carries error (and our code)", () => {
    expect(sseEvent(lemonadeErrorEvent("no space", "no_space"))).toBe('event: error\ndata: {"error":"no space","code":"no_space"}\n\n');
  });
  test("what the CLI reads back is what the node wrote", () => {
    const text = sseEvent(lemonadeProgress(p("a.gguf", 1))) + ": keep-alive\n\n" + sseEvent(lemonadeErrorEvent("x", "y"));
    const { events, rest } = readSseEvents(`${text}event: comp`);
    expect(events.map((e) => e.event)).toEqual(["progress", "error"]);
    expect(JSON.parse(events[1]!.data)).toEqual({ error: "x", code: "y" });
    expect(rest).toBe("event: comp");
  });
  test("CRLF line ends and multi-line data", () => {
    expect(readSseEvents("event: a\r\ndata: 1\r\ndata: 2\r\n\r\n").events).toEqual([{ event: "a", data: "1\n2" }]);
  });
});

describe("coalesce: progress waiting for its line", () => {
  const cases: [what: string, queue: PullProgress[], next: PullProgress, expected: PullProgress[]][] = [
    ["the first", [], p("a", 1), [p("a", 1)]],
    ["more of the same file replaces it", [p("a", 1)], p("a", 9), [p("a", 9)]],
    ["a new file queues behind, so the last file's end keeps its line", [p("a", 1000)], p("b", 1), [p("a", 1000), p("b", 1)]],
    ["only the last entry is replaced", [p("a", 1000), p("b", 1)], p("b", 7), [p("a", 1000), p("b", 7)]],
  ];
  test.each(cases)("%s", (_, queue, next, expected) => {
    expect(coalesce(queue, next)).toEqual(expected);
  });
  test("bounded by the number of files, however many updates come", () => {
    let queue: PullProgress[] = [];
    for (let i = 0; i < 10_000; i++) queue = coalesce(queue, p(i < 5_000 ? "a" : "b", i));
    expect(queue.map((q) => q.file)).toEqual(["a", "b"]);
  });
});
