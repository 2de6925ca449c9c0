/**
 * One soak client: streaming chat completions in a loop until told to stop, each request bounded by
 * a deadline, each ending in exactly one outcome: completed (the stream reached [DONE]), a clean
 * error (an HTTP error status, or an error event in the stream), an unclean end (the connection
 * failed, or the stream ended without [DONE] and without an error event), or a hang (the deadline
 * passed first). A client honours Retry-After (capped) and backs off briefly after other errors, as
 * a well-behaved client would, so a model without capacity is asked again, not hammered.
 */

export type Outcome =
  | { kind: "completed" }
  | { kind: "error"; status: string; message: string }
  | { kind: "unclean"; what: string }
  | { kind: "hang" };

export interface RequestRecord {
  model: string;
  entry: string;
  /** ms since the soak began */
  start: number;
  end: number;
  /** ms from start to the first token, when one came */
  ttft?: number;
  outcome: Outcome;
}

export interface SoakTarget {
  model: string;
  /** label of the node whose API the client calls */
  entry: string;
  url: string;
}

const RETRY_AFTER_CAP_MS = 5_000;
const BACKOFF_MS = 250;

function hasToken(event: unknown): boolean {
  const c = (event as { choices?: { delta?: { content?: unknown }; text?: unknown }[] }).choices?.[0];
  return typeof c?.delta?.content === "string" || typeof c?.text === "string";
}

/** Reads an SSE body: whether it reached [DONE], carried an error event, and when the first token came. */
async function readStream(body: ReadableStream<Uint8Array>, onToken: () => void): Promise<"done" | "cut" | { error: string }> {
  const decoder = new TextDecoder();
  let buffer = "";
  let errored: string | undefined;
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, nl).trim();
      buffer = buffer.slice(nl + 1);
      if (line === "event: error") errored ??= "an SSE event named error";
      if (!line.startsWith("data:")) continue;
      const data = line.slice(5).trim();
      if (data === "[DONE]") return errored !== undefined ? { error: errored } : "done";
      try {
        const event = JSON.parse(data) as Record<string, unknown>;
        if ("error" in event) errored ??= errorMessage(data);
        else if (hasToken(event)) onToken();
      } catch {
        // a line that is not JSON is not a token
      }
    }
  }
  return errored !== undefined ? { error: errored } : "cut";
}

/** The message of an OpenAI-shaped error body, else the body's start. */
function errorMessage(text: string): string {
  try {
    const e = (JSON.parse(text) as { error?: { message?: string } | string }).error;
    return (typeof e === "string" ? e : e?.message) ?? text.slice(0, 200);
  } catch {
    return text.slice(0, 200);
  }
}

/** One streaming request of `maxTokens` tokens, ended by `deadlineMs` at the latest. */
export async function streamOnce(t: SoakTarget, maxTokens: number, deadlineMs: number, clock: () => number): Promise<{ record: RequestRecord; retryAfterMs?: number }> {
  const start = clock();
  const record: RequestRecord = { model: t.model, entry: t.entry, start, end: start, outcome: { kind: "hang" } };
  const signal = AbortSignal.timeout(deadlineMs);
  let retryAfterMs: number | undefined;
  try {
    const res = await fetch(`${t.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: t.model, messages: [{ role: "user", content: "hello" }], max_tokens: maxTokens, ignore_eos: true, stream: true }),
      signal,
    });
    if (res.status !== 200) {
      const ra = Number(res.headers.get("retry-after"));
      if (ra > 0) retryAfterMs = Math.min(ra * 1000, RETRY_AFTER_CAP_MS);
      const text = await res.text();
      const code = /"code"\s*:\s*"([^"]+)"/.exec(text)?.[1];
      record.outcome = { kind: "error", status: `${res.status}${code ? ` ${code}` : ""} via ${t.entry}`, message: errorMessage(text) };
    } else {
      const ended = await readStream(res.body!, () => (record.ttft ??= clock() - start));
      record.outcome =
        ended === "done"
          ? { kind: "completed" }
          : typeof ended === "object"
            ? { kind: "error", status: `200 + error event via ${t.entry}`, message: ended.error }
            : { kind: "unclean", what: "stream ended without [DONE] or an error event" };
    }
  } catch (err) {
    const name = (err as Error).name;
    record.outcome = name === "TimeoutError" || name === "AbortError" ? { kind: "hang" } : { kind: "unclean", what: `connection failed: ${(err as Error).message.slice(0, 80)}` };
  }
  record.end = clock();
  return { record, ...(retryAfterMs !== undefined ? { retryAfterMs } : {}) };
}

export interface LoopOptions {
  maxTokens: number;
  deadlineMs: number;
  running: () => boolean;
  clock: () => number;
  /** Called as each request starts (the soak counts them apart from their records: none may be lost). */
  started: () => void;
  sink: (r: RequestRecord) => void;
}

/** Requests back to back until `running()` says stop; every record goes to `sink` as it ends. */
export async function clientLoop(t: SoakTarget, opts: LoopOptions): Promise<void> {
  while (opts.running()) {
    opts.started();
    const { record, retryAfterMs } = await streamOnce(t, opts.maxTokens, opts.deadlineMs, opts.clock);
    opts.sink(record);
    if (record.outcome.kind !== "completed" && opts.running()) await Bun.sleep(retryAfterMs ?? BACKOFF_MS);
  }
}
