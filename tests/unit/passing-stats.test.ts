/**
 * A forwarded answer's figures on the node it passed through: told once the answer has passed
 * whole, whether its stream ended or the client let go after its last event; never for one cut
 * before its figures came.
 */
import { expect, test } from "bun:test";
import { recordPassingStats } from "../../router/serving/passing-stats.ts";
import type { RequestStats } from "../../metrics/request-stats.ts";

const encoder = new TextEncoder();
const FINAL = 'data: {"choices":[{"delta":{},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}}\n\n';
const MIDDLE = 'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n';

/** An SSE answer that sends `events`, then stays open (a peer's stream whose end has not come yet) or ends. */
function sse(events: string[], ends: boolean): Response {
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      for (const e of events) c.enqueue(encoder.encode(e));
      if (ends) c.close();
    },
  });
  return new Response(body, { status: 200, headers: { "content-type": "text/event-stream" } });
}

async function readEvents(res: Response, n: number, thenCancel: boolean): Promise<void> {
  const reader = res.body!.getReader();
  for (let i = 0; i < n; i++) await reader.read();
  if (thenCancel) await reader.cancel();
  else while (!(await reader.read()).done);
}

test.each([
  ["the stream ends after its last event", [MIDDLE, FINAL, "data: [DONE]\n\n"], true, 3, false, 5],
  ["the client lets go after [DONE], before the stream ends", [MIDDLE, FINAL, "data: [DONE]\n\n"], false, 3, true, 5],
  ["the client lets go before the figures came", [MIDDLE, FINAL], false, 1, true, undefined],
] as const)("%s", async (_, events, ends, reads, cancel, tokens) => {
  const told: (() => RequestStats)[] = [];
  const res = recordPassingStats(sse([...events], ends), "m", "/v1/chat/completions", performance.now(), (s) => told.push(s));
  await readEvents(res, reads, cancel);
  expect(told.map((s) => s().output_tokens)).toEqual(tokens === undefined ? [] : [tokens]);
});
