/**
 * Media a request names by URL (pure). llama-server downloads an `image_url` that is not a `data:`
 * URL (the pinned build carries `common_remote_get_content`; without SSL it fetches plain http:
 * loopback, link-local metadata, the LAN), and the Anthropic and Responses shapes become that same
 * part inside it. A request is data, never a URL for the node to fetch: every media reference must
 * be inline. This finds the first one that is not, in any of the APIs' shapes:
 * - OpenAI chat: `{type: "image_url", image_url: "..." | {url: "..."}}`;
 * - Responses: `{type: "input_image", image_url: "..."}`, `{type: "input_file", file_url: "..."}`;
 * - Anthropic: `{type: "image" | "document", source: {type: "url", url: "..."}}`.
 * The walk is iterative (a deeply nested body must not exhaust the stack) and bounded in nodes.
 */

const MAX_NODES = 1_000_000;

const isInline = (url: unknown) => typeof url === "string" && /^data:/i.test(url.trim());

/** The URL a media reference names, if this object is one that is not inline. */
function remoteOf(node: Record<string, unknown>): string | undefined {
  const image = node.image_url;
  if (typeof image === "string" && !isInline(image)) return image;
  if (image && typeof image === "object" && "url" in image && !isInline((image as { url: unknown }).url)) return String((image as { url: unknown }).url);
  if (typeof node.file_url === "string" && !isInline(node.file_url)) return node.file_url;
  const source = node.source;
  if (source && typeof source === "object" && (source as { type?: unknown }).type === "url") return String((source as { url?: unknown }).url ?? "");
  return undefined;
}

/** The first media URL in `body` that is not a `data:` URL; undefined when every one is inline. */
export function remoteMediaUrl(body: unknown): string | undefined {
  const stack: unknown[] = [body];
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
