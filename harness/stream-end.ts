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
  how: "completed" | "error event" | "error status" | "cut" | "no end";
  /** When it ended, from `since`. */
  ms: number;
  /** What the client read: the stream's text, or the status and body of an answer that was no stream. */
  text: string;
}

const STREAM_BODY = { messages: [{ role: "user", content: "hello" }], max_tokens: 100_000, ignore_eos: true, stream: true };

/**
 * A streaming chat through `via`, read in the background from the start, so its end is timed when
 * it happens (before a fault too). `started` says whether its first chunk came ("streaming") or it
 * ended first ("ended": an error status, say); `end` waits for its end, up to `limitMs`.
 */
export function startStream(via: TestNode, model: string) {
  let text = "";
  let endedAt = 0;
  let cancel: (() => Promise<void>) | undefined;
  let begin!: (how: "streaming" | "ended") => void;
  const started = new Promise<"streaming" | "ended">((resolve) => (begin = resolve));
  const finished = (async (): Promise<StreamEnd["how"]> => {
    try {
      const res = await post(via, "/v1/chat/completions", { model, ...STREAM_BODY });
      if (res.status !== 200 || !res.body) {
        text = `${res.status} ${await res.text()}`;
        return "error status";
      }
      const reader = res.body.getReader();
      cancel = () => reader.cancel();
      const decoder = new TextDecoder();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        text += decoder.decode(value, { stream: true });
        begin("streaming");
      }
    } catch {
      return "cut";
    } finally {
      endedAt = performance.now();
      begin("ended");
    }
    if (/data: \{"error"/.test(text)) return "error event";
    return text.includes("data: [DONE]") ? "completed" : "cut";
  })();
  return {
    started,
    /** How it ended and when, from `since` (negative: it had ended before). */
    async end(since: number, limitMs = LIVENESS_MS): Promise<StreamEnd> {
      let timer: Timer | undefined;
      const deadline = new Promise<"no end">((resolve) => (timer = setTimeout(() => resolve("no end"), Math.max(0, since + limitMs - performance.now()))));
      const how = await Promise.race([finished, deadline]);
      clearTimeout(timer);
      if (how === "no end") {
        await cancel?.().catch(() => undefined);
        return { how, ms: performance.now() - since, text };
      }
      return { how, ms: endedAt - since, text };
    },
  };
}

/** A streaming chat through `via` whose first chunk has arrived (`startStream`); one answered with an error status throws. */
export async function openStream(via: TestNode, model: string) {
  const stream = startStream(via, model);
  if ((await stream.started) === "ended") {
    const e = await stream.end(performance.now());
    if (e.how === "error status") throw new Error(`stream for ${model} through ${via.url}: ${e.text}`);
  }
  return stream;
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
  if (e.how === "error status") return `answered ${e.text.slice(0, 3)} before any stream`;
  return e.how === "cut" ? "stream cut without [DONE]" : "stream never ended";
}

