/**
 * A request's affinity key (pure): what tells the mesh that requests share a prompt prefix, so they
 * go to the same server and reuse its KV cache. A session header names it outright; else the
 * client's user (OpenAI's `user`, Anthropic's `metadata.user_id`); else the conversation's opening
 * (system prompt and messages up to and including the first user message), which every later turn
 * of that chat repeats; else the start of a completion's `prompt`. The key is only ever hashed and
 * compared, and the work is bounded however large the body.
 */

/** Headers a client may name its session by, first found wins. */
export const SESSION_HEADERS = ["x-session-id", "x-mesh-session"] as const;

/** The most of a session or user id that counts: longer ids share a key with their first 256 chars. */
const ID_CHARS = 256;
/** The most of a conversation's opening that is hashed (its text; media only by their first chars). */
const OPENING_CHARS = 16_384;
/** A completion's prompt: its start. */
const PROMPT_CHARS = 512;
/** A message's content parts looked at, and the chars taken from each end of a media part. */
const MAX_PARTS = 64;
const MEDIA_CHARS = 256;

const hash = (text: string) => Bun.hash.wyhash(text).toString(36);

const isObject = (x: unknown): x is Record<string, unknown> => typeof x === "object" && x !== null && !Array.isArray(x);
const nonEmpty = (x: unknown): x is string => typeof x === "string" && x.trim() !== "";

/** The key, or none when the request says nothing that would share a prefix (an embedding's input). */
export function affinityKey(body: unknown, header: (name: string) => string | undefined): string | undefined {
  for (const name of SESSION_HEADERS) {
    const v = header(name);
    if (nonEmpty(v)) return `s:${v.slice(0, ID_CHARS)}`;
  }
  if (!isObject(body)) return undefined;
  if (nonEmpty(body.user)) return `u:${body.user.slice(0, ID_CHARS)}`;
  const meta = body.metadata;
  if (isObject(meta) && nonEmpty(meta.user_id)) return `u:${meta.user_id.slice(0, ID_CHARS)}`;
  if (Array.isArray(body.messages)) {
    const opening = openingOf(body.system, body.messages);
    return opening === "" ? undefined : `c:${hash(opening)}`;
  }
  const prompt = promptStart(body.prompt);
  return prompt === undefined ? undefined : `p:${hash(prompt)}`;
}

/** System prompt and messages up to and including the first user message, as text, at most OPENING_CHARS. */
export function openingOf(system: unknown, messages: readonly unknown[]): string {
  const out = new Bounded(OPENING_CHARS);
  if (system !== undefined) out.add("system", contentText(system));
  for (const m of messages) {
    if (out.full) break;
    if (!isObject(m)) continue;
    const role = typeof m.role === "string" ? m.role.slice(0, 32) : "";
    out.add(role, contentText(m.content));
    if (role === "user") break;
  }
  return out.text;
}

/** Text of a message's content: a string, or parts (text in full, other parts by their first chars). */
function contentText(content: unknown): string {
  if (typeof content === "string") return content.slice(0, OPENING_CHARS);
  if (!Array.isArray(content)) return "";
  const out = new Bounded(OPENING_CHARS);
  for (const part of content.slice(0, MAX_PARTS)) {
    if (out.full) break;
    if (typeof part === "string") out.add("", part);
    else if (isObject(part)) out.add(typeof part.type === "string" ? part.type.slice(0, 32) : "", typeof part.text === "string" ? part.text : mediaSample(part));
  }
  return out.text;
}

/**
 * A media part's payload (an image's data URL, a file's base64) by its length, start and end: enough
 * to tell two apart (two PNGs of one size share their first bytes), never read whole.
 */
function mediaSample(part: Record<string, unknown>): string {
  const sample = (v: string) => `${v.length}:${v.slice(0, MEDIA_CHARS)}${v.slice(-MEDIA_CHARS)}`;
  for (const [k, v] of Object.entries(part)) {
    if (k === "type") continue;
    if (typeof v === "string") return sample(v);
    if (isObject(v)) for (const w of Object.values(v)) if (typeof w === "string") return sample(w);
  }
  return "";
}

/** The start of a completion's prompt: a string, a list of strings (the first) or of token ids. */
function promptStart(prompt: unknown): string | undefined {
  if (nonEmpty(prompt)) return prompt.slice(0, PROMPT_CHARS);
  if (!Array.isArray(prompt) || prompt.length === 0) return undefined;
  if (nonEmpty(prompt[0])) return prompt[0].slice(0, PROMPT_CHARS);
  const tokens = prompt.slice(0, PROMPT_CHARS).filter((t) => typeof t === "number");
  return tokens.length ? tokens.join(",") : undefined;
}

/** Text built from labelled pieces, cut at a bound. */
class Bounded {
  text = "";
  constructor(private readonly max: number) {}
  get full(): boolean {
    return this.text.length >= this.max;
  }
  add(label: string, piece: string): void {
    if (this.full) return;
    // The separators keep ["ab","c"] and ["a","bc"] apart.
    this.text = (this.text + `\u0000${label}\u0001${piece}`).slice(0, this.max);
  }
}
