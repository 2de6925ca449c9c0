/**
 * A streaming chat in flight, read on in the background from its first chunk, so its end (a
 * completion, the dialect's error event, a cut) is timed when it happens: what a fault test and
 * bench/scale.ts measure when the node answering dies mid-answer.
 */
import { post } from "./api.ts";
import type { TestNode } from "./node.ts";

/** The liveness bound every fault test asserts: far above the goals (10 s, 15 s), so a loaded machine passes and a hang does not. */
export const LIVENESS_MS = 60_000;

export interface StreamEnd {
  how: "completed" | "error event" | "cut" | "no end";
  /** When it ended, from `since`. */
  ms: number;
  text: string;
}

/**
 * A streaming chat through `via` whose first chunk has arrived, read on in the background from
 * then on, so its end is timed when it happens (before a fault too); `end` waits for it, up to `limitMs`.
 */
export async function openStream(via: TestNode, model: string) {
  const body = { model, messages: [{ role: "user", content: "hello" }], max_tokens: 100_000, ignore_eos: true, stream: true };
  const res = await post(via, "/v1/chat/completions", body);
  if (res.status !== 200 || !res.body) throw new Error(`stream for ${model} through ${via.url}: ${res.status} ${await res.text()}`);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  const first = await reader.read();
  text += decoder.decode(first.value);
  let endedAt = 0;
  const finished = (async (): Promise<StreamEnd["how"]> => {
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        text += decoder.decode(value, { stream: true });
      }
    } catch {
      return "cut";
    } finally {
      endedAt = performance.now();
    }
    if (/data: \{"error"/.test(text)) return "error event";
    return text.includes("data: [DONE]") ? "completed" : "cut";
  })();
  return {
    /** How it ended and when, from `since` (negative: it had ended before). */
    async end(since: number, limitMs = LIVENESS_MS): Promise<StreamEnd> {
      let timer: Timer | undefined;
      const deadline = new Promise<"no end">((resolve) => (timer = setTimeout(() => resolve("no end"), Math.max(0, since + limitMs - performance.now()))));
      const how = await Promise.race([finished, deadline]);
      clearTimeout(timer);
      if (how === "no end") {
        await reader.cancel().catch(() => undefined);
        return { how, ms: performance.now() - since, text };
      }
      return { how, ms: endedAt - since, text };
    },
  };
}

/** What a stream's end tells a client: how it ended and whether the client can tell it was cut short. */
export function describeStreamEnd(e: StreamEnd): string {
  if (e.how === "completed") return "stream completed";
  if (e.how === "error event") {
    const m = /data: (\{"error".*)/.exec(e.text);
    let code = "";
    try {
      code = ` (${(JSON.parse(m![1]!) as { error: { code?: string } }).error.code ?? ""})`;
    } catch {
      // the event's shape is the product's; its presence is what counts here
    }
    return `stream ended with an error event${code}`;
  }
  return e.how === "cut" ? "stream cut without [DONE]" : "stream never ended";
}

