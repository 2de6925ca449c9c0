/**
 * Media a request names by URL (pure). llama-server downloads an `image_url` that is not a `data:`
 * URL (the pinned build carries `common_remote_get_content`; without SSL it fetches plain http:
 * loopback, link-local metadata, the LAN), and the Anthropic and Responses shapes become that same
 * part inside it. A request is data, never a URL for the node to fetch: every media reference must
 * be inline, whatever its kind, so one rule covers the kinds a later llama.cpp or API may add:
 * - any `…_url` field (`image_url`, `video_url`, `audio_url`, `file_url`, …), a string or `{url}`;
 * - a media object (`input_audio`, `input_video`, `audio`, `video`, `file`) whose `url`, or whose
 *   `data` when that names a scheme (base64 never holds a colon), is not a `data:` URL;
 * - Anthropic's `{type: "image" | "document" | …, source: {type: "url", url}}`.
 * The walk is iterative (a deeply nested body must not exhaust the stack) and bounded in nodes.
 */

const MAX_NODES = 1_000_000;

const isInline = (url: unknown) => typeof url === "string" && /^data:/i.test(url.trim());
/** A field that names media by URL in one API's shape or another's. */
const URL_FIELD = /_url$/i;
/** The objects that carry media inline (`data`) or by reference (`url`). */
const MEDIA_OBJECT = new Set(["input_audio", "input_video", "audio", "video", "file"]);
const NAMES_SCHEME = /^\s*[a-z][a-z0-9+.-]*:/i;

/** The URL this media reference names when it is not inline. */
function remoteRef(value: unknown): string | undefined {
  if (typeof value === "string") return isInline(value) ? undefined : value;
  if (value && typeof value === "object" && "url" in value && !isInline((value as { url: unknown }).url)) return String((value as { url: unknown }).url);
  return undefined;
}

/** The URL a media reference names, if this object is one that is not inline. */
function remoteOf(node: Record<string, unknown>): string | undefined {
  for (const [key, value] of Object.entries(node)) {
    if (URL_FIELD.test(key)) {
      const remote = remoteRef(value);
      if (remote !== undefined) return remote;
    } else if (MEDIA_OBJECT.has(key) && value && typeof value === "object") {
      const media = value as { url?: unknown; data?: unknown };
      if ("url" in media && !isInline(media.url)) return String(media.url);
      if (typeof media.data === "string" && NAMES_SCHEME.test(media.data) && !isInline(media.data)) return media.data;
    }
  }
  const source = node.source;
  if (source && typeof source === "object" && (source as { type?: unknown }).type === "url") return String((source as { url?: unknown }).url ?? "");
  return undefined;
}

/**
 * Top-level fields that describe tools, output formats or the caller, never media llama.cpp
 * fetches: a JSON schema's `default` or a `callback_url` there is not a request to download.
 */
const NOT_MEDIA: ReadonlySet<string> = new Set(["tools", "functions", "tool_choice", "response_format", "text", "json_schema", "grammar", "metadata"]);

/** The first media URL in `body` that is not a `data:` URL; undefined when every one is inline. */
export function remoteMediaUrl(body: unknown): string | undefined {
  const top = body !== null && typeof body === "object" && !Array.isArray(body) ? Object.fromEntries(Object.entries(body).filter(([k]) => !NOT_MEDIA.has(k))) : body;
  const stack: unknown[] = [top];
  for (let seen = 0; stack.length > 0 && seen < MAX_NODES; seen++) {
    const node = stack.pop();
    if (typeof node !== "object" || node === null) continue;
    if (Array.isArray(node)) {
      for (const item of node) stack.push(item);
      continue;
    }
    const remote = remoteOf(node as Record<string, unknown>);
    if (remote !== undefined) return remote;
    for (const value of Object.values(node)) if (typeof value === "object" && value !== null) stack.push(value);
  }
  // Too many parts to look at all of them: what was not checked is not let through.
  return stack.length > 0 ? `(one of over ${MAX_NODES} parts, not checked)` : undefined;
}
