import { ANSWERED_BY_HEADER, RETRIED_FROM_HEADER } from "../mesh/mesh-headers.ts";
/**
 * The requests of bench/replicas.ts: one streamed chat completion, read to its end, with what the
 * mesh and llama-server say about it (the node that answered, whether it was retried elsewhere, the
 * prompt tokens taken from the KV cache), and closed loops of them for a fixed time.
 */

export interface ChatMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

export interface Reply {
  status: number;
  /** ms from sending to the first content token (undefined: none came). */
  ttftMs?: number;
  totalMs: number;
  answeredBy?: string;
  retriedFrom?: string;
  /** Prompt tokens llama-server reused from its cache (`timings.cache_n`), when it said. */
  cacheN?: number;
  text: string;
  /** Why it did not complete: an error status's code, a cut stream, a deadline. */
  failure?: string;
}

export interface ChatRequest {
  url: string;
  model: string;
  messages: ChatMessage[];
  maxTokens: number;
  user?: string;
  deadlineMs: number;
}

interface StreamEvent {
  choices?: { delta?: { content?: string } }[];
  timings?: { cache_n?: number };
  error?: unknown;
}

/** Reads one SSE body to its end (bounded by the request's deadline), filling the reply. */
async function readEvents(body: ReadableStream<Uint8Array>, reply: Reply, started: number): Promise<void> {
  const decoder = new TextDecoder();
  let buffer = "";
  let done = false;
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, nl).trim();
      buffer = buffer.slice(nl + 1);
      if (!line.startsWith("data:")) continue;
      const data = line.slice(5).trim();
      if (data === "[DONE]") done = true;
      if (done) continue;
      let event: StreamEvent;
      try {
        event = JSON.parse(data) as StreamEvent;
      } catch {
        continue;
      }
      if (event.error !== undefined) reply.failure ??= "error event";
      const content = event.choices?.[0]?.delta?.content;
      if (typeof content === "string" && content.length > 0) {
        reply.ttftMs ??= performance.now() - started;
        reply.text += content;
      }
      if (typeof event.timings?.cache_n === "number") reply.cacheN = event.timings.cache_n;
    }
  }
  if (!done) reply.failure ??= "stream ended without [DONE]";
}

export async function streamChat(req: ChatRequest): Promise<Reply> {
  const started = performance.now();
  const reply: Reply = { status: 0, totalMs: 0, text: "" };
  try {
    const res = await fetch(`${req.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: req.model,
        messages: req.messages,
        max_tokens: req.maxTokens,
        ignore_eos: true,
        temperature: 0,
        stream: true,
        ...(req.user !== undefined ? { user: req.user } : {}),
      }),
      signal: AbortSignal.timeout(req.deadlineMs),
    });
    reply.status = res.status;
    reply.answeredBy = res.headers.get(ANSWERED_BY_HEADER) ?? undefined;
    reply.retriedFrom = res.headers.get(RETRIED_FROM_HEADER) ?? undefined;
    if (res.status === 200) await readEvents(res.body!, reply, started);
    else reply.failure = `${res.status} ${(await res.text()).slice(0, 200)}`;
  } catch (err) {
    const name = (err as Error).name;
    reply.failure = name === "TimeoutError" || name === "AbortError" ? "deadline" : `connection failed: ${(err as Error).message.slice(0, 80)}`;
  }
  reply.totalMs = performance.now() - started;
  return reply;
}

/** `clients` closed loops of `one(i)` while `going()`; every reply, in the order they ended. */
export async function closedLoops(clients: number, going: () => boolean, one: (client: number) => Promise<Reply>): Promise<Reply[]> {
  const replies: Reply[] = [];
  await Promise.all(
    Array.from({ length: clients }, async (_, i) => {
      while (going()) replies.push(await one(i));
    }),
  );
  return replies;
}

/** A `going` for closedLoops: true for `seconds` from now. */
export function forSeconds(seconds: number): () => boolean {
  const until = performance.now() + seconds * 1000;
  return () => performance.now() < until;
}

/** How many replies each answering node gave, as "A 12, B 10". */
export function answeredBy(replies: readonly Reply[], names: ReadonlyMap<string, string>): string {
  const counts = new Map<string, number>();
  for (const r of replies) {
    const who = r.answeredBy ? (names.get(r.answeredBy) ?? r.answeredBy.slice(0, 6)) : "-";
    counts.set(who, (counts.get(who) ?? 0) + 1);
  }
  return [...counts].sort(([a], [b]) => a.localeCompare(b)).map(([who, n]) => `${who} ${n}`).join(", ");
}
