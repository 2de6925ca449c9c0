/**
 * Images a client names by URL, fetched by the node the client called and sent on inline, so that
 * nothing downstream (no member, no llama-server) ever fetches anything. Only a local client's
 * request comes here: a member's forwarded request makes this node fetch nothing (`openai.ts`).
 * The rules are pure and table-tested (the addresses in `public-address.ts`; here `urlRefusal`,
 * `imageUrls`, `withImagesInline`); the shell around them (`inlineRemoteImages`) does the I/O
 * through `FetchIo`:
 * - http or https only, no user name or password in the URL;
 * - the host name resolved, and EVERY address public (no loopback, private, link-local, CGNAT,
 *   unspecified, multicast, broadcast, reserved, ULA, nor an IPv4 one of those inside IPv6),
 *   unless the operator allows the host, or that address, with `--media-hosts` (a NAS on the LAN);
 * - the connection goes to the address that was checked (no second lookup to rebind): plain http
 *   to the IP with a `Host` header; https to the IP with the name as TLS SNI and as the name the
 *   certificate is verified against (Bun's `tls.serverName`), never through a proxy;
 * - redirects followed one hop at a time, at most `MAX_REDIRECTS`, each hop under the same rule;
 * - one deadline for all of a request's images, and a bound on their bytes that stops the read;
 * - the bytes must be an image llama.cpp reads (`readableImage`); its type comes from the bytes.
 * Only images: other media by URL stay refused (`media-urls.ts`).
 */
import { lookup as dnsLookup } from "node:dns/promises";
import { isIP } from "node:net";
import { isObject } from "../http/json.ts";
import { hostRefusal } from "./public-address.ts";
import { readableImage } from "./image-check.ts";
import { remoteMediaUrl } from "./media-urls.ts";

/** The most bytes of images by URL one request may fetch, whatever `--max-body-size` allows. */
export const MAX_IMAGE_FETCH_BYTES = 20 * 2 ** 20;
/** How long fetching all of one request's images may take, redirects and lookups included. */
export const IMAGE_FETCH_DEADLINE_MS = 10_000;
/** Redirects followed per image. */
export const MAX_REDIRECTS = 3;
/** Images by URL in one request. */
export const MAX_IMAGES_BY_URL = 16;
const MAX_NODES = 1_000_000;

export interface ImageFetchPolicy {
  /** Host names or IPs the operator allows whatever their addresses (`--media-hosts`). */
  allowHosts: readonly string[];
  /** The most bytes this request's images may have together. */
  maxBytes: number;
  deadlineMs?: number;
}

/**
 * The byte bound for one request's images: at most `MAX_IMAGE_FETCH_BYTES` and `--max-body-size`,
 * and no more than leaves the request, once its images are inline (base64: 4 bytes per 3), within
 * `--max-body-size`, the bound every node it may be forwarded to holds it to.
 */
export const imageBytesFor = (maxBodyBytes: number, bodyBytes: number): number =>
  Math.max(0, Math.min(MAX_IMAGE_FETCH_BYTES, maxBodyBytes, Math.floor(((maxBodyBytes - bodyBytes) * 3) / 4)));

/** The URL parsed when it is one this node may fetch from by its form (scheme, no credentials), else why not. */
export function urlRefusal(text: string): { url: URL } | { refusal: string } {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return { refusal: "it is not a URL" };
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return { refusal: `its scheme ${url.protocol} is not http or https` };
  if (url.username || url.password) return { refusal: "a URL with a user name or password is not fetched" };
  return { url };
}

// ---- The request shapes (pure) ----

/** One image a request names by URL: where it is, in which API's shape. */
type ImageRef =
  | { shape: "image_url"; part: Record<string, unknown>; field: "image_url"; url: string }
  | { shape: "anthropic"; part: Record<string, unknown>; url: string };

const isInline = (url: string) => /^\s*data:/i.test(url);
const urlOf = (ref: unknown): string | undefined => (typeof ref === "string" ? ref : isObject(ref) && typeof ref.url === "string" ? ref.url : undefined);

/** The image this part names by URL: a chat `image_url` part, a Responses `input_image`, an Anthropic image with a `url` source. */
function imageRefOf(part: Record<string, unknown>): ImageRef | undefined {
  if (part.type === "image_url" || part.type === "input_image") {
    const url = urlOf(part.image_url);
    return url !== undefined && !isInline(url) ? { shape: "image_url", part, field: "image_url", url } : undefined;
  }
  if (part.type === "image" && isObject(part.source) && part.source.type === "url" && typeof part.source.url === "string") return { shape: "anthropic", part, url: part.source.url };
  return undefined;
}

/** Top-level fields that never carry media (`media-urls.ts` reads the same way). */
const NOT_MEDIA: ReadonlySet<string> = new Set(["tools", "functions", "tool_choice", "response_format", "text", "json_schema", "grammar", "metadata"]);

/** Every image `body` names by URL, in the order they come (the walk is iterative and bounded, like `remoteMediaUrl`'s). */
function imageRefs(body: unknown): ImageRef[] {
  const found: ImageRef[] = [];
  const stack: unknown[] = isObject(body) ? Object.entries(body).filter(([k]) => !NOT_MEDIA.has(k)).map(([, v]) => v).reverse() : [body];
  for (let seen = 0; stack.length > 0 && seen < MAX_NODES; seen++) {
    const node = stack.pop();
    if (typeof node !== "object" || node === null) continue;
    const children = Array.isArray(node) ? node : Object.values(node);
    if (!Array.isArray(node)) {
      const ref = imageRefOf(node as Record<string, unknown>);
      if (ref) {
        found.push(ref);
        continue;
      }
    }
    for (let i = children.length - 1; i >= 0; i--) if (typeof children[i] === "object" && children[i] !== null) stack.push(children[i]);
  }
  return found;
}

/** The URLs of the images `body` names by URL, each once, in order. */
export function imageUrls(body: unknown): string[] {
  return [...new Set(imageRefs(body).map((r) => r.url))];
}

/** An image as bytes carry it: its type (from the bytes) and its base64. */
export interface InlineImage {
  mediaType: string;
  base64: string;
}

/**
 * `body` with every image it names by URL replaced by its inline form, `inline(url)`: a chat or
 * Responses part gets a `data:` URL (its `detail` kept), an Anthropic block a base64 source. A copy:
 * `body` is left as it was.
 */
export function withImagesInline(body: unknown, inline: (url: string) => InlineImage): unknown {
  const copy = structuredClone(body);
  for (const ref of imageRefs(copy)) {
    const image = inline(ref.url);
    if (ref.shape === "anthropic") ref.part.source = { type: "base64", media_type: image.mediaType, data: image.base64 };
    else {
      const dataUrl = `data:${image.mediaType};base64,${image.base64}`;
      const old = ref.part[ref.field];
      ref.part[ref.field] = isObject(old) ? { ...old, url: dataUrl } : dataUrl;
    }
  }
  return copy;
}

// ---- The shell: lookups and requests ----

/** The node's way out, injected in tests. */
export interface FetchIo {
  /** Every address `host` resolves to. */
  lookup(host: string): Promise<string[]>;
  /** One GET of `url` from `address` (the one that was checked), following no redirect. */
  get(url: URL, address: string, signal: AbortSignal): Promise<Response>;
}

export const NETWORK_IO: FetchIo = {
  lookup: async (host) => (await dnsLookup(host, { all: true, verbatim: true })).map((a) => a.address),
  get: (url, address, signal) => {
    const pinned = new URL(url);
    pinned.hostname = address.includes(":") ? `[${address}]` : address;
    const name = url.hostname.replace(/^\[|\]$/g, "");
    // The IP is pinned; the name stays the request's `Host` and, for https, the TLS SNI and the
    // name the certificate must carry (Bun's `serverName`). No proxy: it would resolve again.
    return fetch(pinned, {
      headers: { host: url.host, accept: "image/*", "accept-encoding": "identity", "user-agent": "mesh" },
      redirect: "manual",
      signal,
      proxy: false,
      ...(url.protocol === "https:" && isIP(name) === 0 ? { tls: { serverName: name } } : {}),
    } as RequestInit);
  },
};

class FetchRefused extends Error {
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
  }
}

const REFUSED = "remote_media_refused";
const FAILED = "remote_media_failed";
const NOT_IMAGE = "invalid_image";

/** `promise`, or a throw once `signal` aborts (a lookup cannot be cancelled, only left behind). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const abort = () => reject(signal.reason);
    signal.addEventListener("abort", abort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", abort));
  });
}

/** The body's bytes, read until `max` and no further. */
async function readBounded(res: Response, max: number, signal: AbortSignal): Promise<Buffer> {
  const tooLarge = () => new FetchRefused(`it is larger than the ${max} bytes this request's images may have (at most ${MAX_IMAGE_FETCH_BYTES} and --max-body-size)`, FAILED);
  const declared = Number(res.headers.get("content-length"));
  if (Number.isFinite(declared) && declared > max) {
    await res.body?.cancel().catch(() => undefined);
    throw tooLarge();
  }
  if (!res.body) return Buffer.alloc(0);
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    let chunk: Awaited<ReturnType<typeof reader.read>>;
    try {
      chunk = await untilAborted(reader.read(), signal);
    } catch (err) {
      // Not waited on: a stalled body would stall its own cancel.
      void reader.cancel().catch(() => undefined);
      throw err;
    }
    const { done, value } = chunk;
    if (done) break;
    total += value.byteLength;
    if (total > max) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge();
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks);
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/** One image's bytes, each hop under the rule. */
async function fetchOne(start: string, allowHosts: readonly string[], maxBytes: number, io: FetchIo, signal: AbortSignal): Promise<Buffer> {
  let current = start;
  for (let hop = 0; ; hop++) {
    const checked = urlRefusal(current);
    if ("refusal" in checked) throw new FetchRefused(hop === 0 ? checked.refusal : `it redirects to ${current.slice(0, 200)}: ${checked.refusal}`, REFUSED);
    const { url } = checked;
    const host = url.hostname.replace(/^\[|\]$/g, "");
    let addresses: string[];
    if (isIP(host) !== 0) addresses = [host];
    else {
      try {
        addresses = await untilAborted(io.lookup(host), signal);
      } catch (err) {
        if (signal.aborted) throw err;
        throw new FetchRefused(`its host ${host} does not resolve`, FAILED);
      }
    }
    const refusal = hostRefusal(host, addresses, allowHosts);
    if (refusal !== undefined) throw new FetchRefused(hop === 0 ? refusal : `it redirects to ${current.slice(0, 200)}: ${refusal}`, REFUSED);
    let res: Response;
    try {
      res = await io.get(url, addresses[0]!, signal);
    } catch (err) {
      if (signal.aborted) throw err;
      throw new FetchRefused(`it could not be fetched (${(err as Error).message})`, FAILED);
    }
    if (REDIRECTS.has(res.status)) {
      await res.body?.cancel().catch(() => undefined);
      const location = res.headers.get("location");
      if (location === null) throw new FetchRefused(`it answered status ${res.status} with no Location`, FAILED);
      if (hop >= MAX_REDIRECTS) throw new FetchRefused(`it redirects more than ${MAX_REDIRECTS} times`, REFUSED);
      try {
        current = new URL(location, url).href;
      } catch {
        throw new FetchRefused(`it redirects to ${location.slice(0, 200)}, which is not a URL`, REFUSED);
      }
      continue;
    }
    if (res.status < 200 || res.status > 299) {
      await res.body?.cancel().catch(() => undefined);
      throw new FetchRefused(`it answered status ${res.status}`, FAILED);
    }
    return readBounded(res, maxBytes, signal);
  }
}

/** The bytes as an image llama.cpp reads, typed by the bytes themselves (read once); else why not. */
function asImage(bytes: Buffer): InlineImage | string {
  const image = readableImage(bytes);
  return typeof image === "string" ? image : { mediaType: image.mediaType, base64: bytes.toString("base64") };
}

export type Inlined = { body: unknown } | { refusal: string; code: string };

const named = (url: string) => `the image at ${url.length > 200 ? `${url.slice(0, 200)}…` : url}`;

/**
 * `body` with every image it names by URL fetched and put inline; `body` itself when it names none,
 * or names other media by URL too (that is refused whatever its images are: nothing is fetched for
 * it). Else the first image that could not be had, and why.
 */
export async function inlineRemoteImages(body: unknown, policy: ImageFetchPolicy, io: FetchIo = NETWORK_IO, signal?: AbortSignal): Promise<Inlined> {
  const urls = imageUrls(body);
  if (urls.length === 0) return { body };
  // Other media by URL beside the images: refused as before, with no image fetched for nothing.
  if (remoteMediaUrl(withImagesInline(body, () => ({ mediaType: "image/png", base64: "" }))) !== undefined) return { body };
  if (urls.length > MAX_IMAGES_BY_URL) return { refusal: `a request may name at most ${MAX_IMAGES_BY_URL} images by URL (this one names ${urls.length}); send the rest inline`, code: REFUSED };
  const deadlineMs = policy.deadlineMs ?? IMAGE_FETCH_DEADLINE_MS;
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(new Error("deadline")), deadlineMs);
  const both = signal ? AbortSignal.any([deadline.signal, signal]) : deadline.signal;
  const images = new Map<string, InlineImage>();
  let left = policy.maxBytes;
  try {
    for (const url of urls) {
      let bytes: Buffer;
      try {
        bytes = await fetchOne(url, policy.allowHosts, left, io, both);
      } catch (err) {
        if (err instanceof FetchRefused) return { refusal: `${named(url)} was not fetched: ${err.message}`, code: err.code };
        if (deadline.signal.aborted) return { refusal: `${named(url)} was not fetched: it timed out (all of a request's images must come within ${deadlineMs / 1000} s)`, code: FAILED };
        if (signal?.aborted) return { refusal: `${named(url)} was not fetched: the request was cancelled`, code: FAILED };
        return { refusal: `${named(url)} was not fetched: ${(err as Error).message}`, code: FAILED };
      }
      left -= bytes.byteLength;
      const image = asImage(bytes);
      if (typeof image === "string") return { refusal: `${named(url)} ${image}`, code: NOT_IMAGE };
      images.set(url, image);
    }
  } finally {
    clearTimeout(timer);
  }
  return { body: withImagesInline(body, (url) => images.get(url)!) };
}
