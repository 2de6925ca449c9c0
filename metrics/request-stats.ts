/**
 * Figures of one inference request for `/api/v1/stats`, read from what llama-server already
 * reports (pure): its `timings` (prompt and decode times and counts) and OpenAI `usage`, from a
 * JSON body or from the last events of an SSE stream.
 */

export interface RequestStats {
  model: string;
  route: string;
  /** Seconds until the first token: prompt processing time, else measured at the router. */
  time_to_first_token: number | null;
  tokens_per_second: number | null;
  input_tokens: number | null;
  output_tokens: number | null;
  /** Wall time of the whole request at the router, seconds. */
  duration: number;
  /** Prompt tokens the server read (not from its cache), in `time_to_first_token`, when it says. */
  prompt_read?: number;
  /** Tokens a draft model proposed, and how many of them the target accepted (only when it drafted). */
  draft_tokens?: number;
  draft_accepted?: number;
}

interface Timings {
  /** Prompt tokens reused from the cache; with prompt_n, the whole prompt. */
  cache_n?: number;
  prompt_n?: number;
  prompt_ms?: number;
  predicted_n?: number;
  predicted_ms?: number;
  predicted_per_second?: number;
  /** Present when a draft model drafted: tokens proposed, and accepted by the target. */
  draft_n?: number;
  draft_n_accepted?: number;
}
interface Usage {
  prompt_tokens?: number;
  completion_tokens?: number;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null;
const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : undefined);

export interface ReportedFigures {
  timings: Timings | undefined;
  usage: Usage | undefined;
}

/** `timings` and `usage` of one response object, when it has them. */
export function figuresOf(body: unknown): ReportedFigures {
  if (!isObject(body)) return { timings: undefined, usage: undefined };
  return {
    timings: isObject(body.timings) ? (body.timings as Timings) : undefined,
    usage: isObject(body.usage) ? (body.usage as Usage) : undefined,
  };
}

/**
 * The figures in the last SSE events that carry them (llama-server puts them in the final chunk):
 * read from the end, and only events that name `timings` or `usage` are parsed, so a stream's
 * token events cost a string search each, not a JSON parse.
 */
export function figuresOfSse(tail: string): ReportedFigures {
  let timings: Timings | undefined;
  let usage: Usage | undefined;
  let end = tail.length;
  while (end > 0 && (timings === undefined || usage === undefined)) {
    const start = tail.lastIndexOf("\n", end - 1) + 1;
    const line = tail.slice(start, end);
    end = start - 1;
    if (!line.startsWith("data:") || !(line.includes('"timings"') || line.includes('"usage"'))) continue;
    const data = line.slice(5).trim();
    if (!data.startsWith("{")) continue;
    try {
      const f = figuresOf(JSON.parse(data));
      timings ??= f.timings;
      usage ??= f.usage;
    } catch {
      // the tail may start mid-event
    }
  }
  return { timings, usage };
}

export function toStats(
  model: string,
  route: string,
  f: ReportedFigures,
  measured: { firstByteMs: number | undefined; totalMs: number },
): RequestStats {
  const t = f.timings;
  const promptMs = num(t?.prompt_ms);
  const tps = num(t?.predicted_per_second) ?? (num(t?.predicted_n) && num(t?.predicted_ms) ? (t!.predicted_n! / t!.predicted_ms!) * 1000 : undefined);
  return {
    model,
    route,
    time_to_first_token: promptMs !== undefined ? promptMs / 1000 : measured.firstByteMs !== undefined ? measured.firstByteMs / 1000 : null,
    tokens_per_second: tps ?? null,
    input_tokens: num(f.usage?.prompt_tokens) ?? (num(t?.prompt_n) !== undefined ? t!.prompt_n! + (num(t?.cache_n) ?? 0) : null),
    output_tokens: num(f.usage?.completion_tokens) ?? num(t?.predicted_n) ?? null,
    duration: measured.totalMs / 1000,
    ...(num(t?.prompt_n) !== undefined && promptMs !== undefined ? { prompt_read: t!.prompt_n! } : {}),
    ...draftFigures(t),
  };
}

function draftFigures(t: Timings | undefined): Pick<RequestStats, "draft_tokens" | "draft_accepted"> {
  const drafted = num(t?.draft_n);
  if (drafted === undefined) return {};
  return { draft_tokens: drafted, draft_accepted: num(t?.draft_n_accepted) ?? 0 };
}
