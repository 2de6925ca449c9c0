/**
 * The images a request carries inline, checked before anything loads or goes anywhere (pure).
 * llama-server decodes an image with stb_image and hands whatever that cannot read to `ffprobe` as
 * a possible video (a process, fed a stranger's bytes, on a machine that has ffmpeg), and decodes
 * an image whole whatever its size: a 750 KB PNG of 16000 x 16000 pixels took 16 s and 1.5 GB. So
 * an image must be one of the formats stb_image reads, by its header (read with `image-size`), and
 * at most `MAX_IMAGE_PIXELS`; anything else is the client's error, in its dialect, with the reason.
 */
import { imageSize } from "image-size";
import { isObject } from "../http/json.ts";

/** What stb_image in llama.cpp decodes, by `image-size`'s names, with their media types (WebP it does not: llama.cpp would pass it to ffprobe). */
const READABLE: Readonly<Record<string, string>> = { png: "image/png", jpg: "image/jpeg", gif: "image/gif", bmp: "image/bmp" };

/** Pixels of one image: a 48-megapixel photo (8000 x 6000) passes; the projector scales every image down to a few hundred pixels a side anyway. */
export const MAX_IMAGE_PIXELS = 50_000_000;

/** The inline images of a request as sent (chat completions or Anthropic messages): each one's base64 text and where it is. */
function* inlineImages(body: unknown): Generator<{ where: string; data: string | undefined }> {
  if (!isObject(body) || !Array.isArray(body.messages)) return;
  for (const [i, message] of body.messages.entries()) {
    if (!isObject(message) || !Array.isArray(message.content)) continue;
    yield* partsImages(message.content, `messages[${i}]`);
  }
}

function* partsImages(parts: unknown[], where: string): Generator<{ where: string; data: string | undefined }> {
  for (const [j, part] of parts.entries()) {
    if (!isObject(part)) continue;
    const at = `${where}.content[${j}]`;
    if (part.type === "image_url") {
      const ref = part.image_url;
      const url = typeof ref === "string" ? ref : isObject(ref) && typeof ref.url === "string" ? ref.url : undefined;
      yield { where: at, data: url === undefined ? undefined : dataUrlBase64(url) };
    } else if (part.type === "image" && isObject(part.source) && part.source.type === "base64") {
      const data = part.source.data;
      yield { where: at, data: typeof data === "string" ? data : undefined };
    } else if (part.type === "tool_result" && Array.isArray(part.content)) {
      yield* partsImages(part.content, at);
    }
  }
}

/** The base64 payload of a `data:…;base64,` URL; undefined for any other URL (the media rule refuses those before this). */
function dataUrlBase64(url: string): string | undefined {
  const match = /^\s*data:[^,]*;base64,/i.exec(url);
  return match ? url.slice(match[0].length) : undefined;
}

const BASE64 = /^[A-Za-z0-9+/\r\n]*={0,2}\s*$/;

/** The media type of bytes that are an image llama.cpp reads; else why they are not one. */
export function readableImage(bytes: Uint8Array): { mediaType: string } | string {
  let size: { width: number; height: number; type?: string | undefined };
  try {
    size = imageSize(bytes);
  } catch {
    return "is not an image (its bytes are no PNG, JPEG, GIF or BMP)";
  }
  const mediaType = size.type === undefined ? undefined : READABLE[size.type];
  if (mediaType === undefined) return `is ${size.type ?? "an unknown format"}, which llama.cpp does not read; send PNG, JPEG, GIF or BMP`;
  if (size.width * size.height > MAX_IMAGE_PIXELS) return `is ${size.width} x ${size.height} pixels, over the ${MAX_IMAGE_PIXELS / 1e6} megapixels an image may have here; scale it down first`;
  return { mediaType };
}

/** Why the inline image `data` (base64) cannot be read, or undefined when it can. */
export function imageProblem(data: string | undefined): string | undefined {
  if (data === undefined) return "is not inline base64 (send it as a data:image/...;base64, URL)";
  if (!BASE64.test(data)) return "is not valid base64";
  const image = readableImage(Buffer.from(data, "base64"));
  return typeof image === "string" ? image : undefined;
}

/** The refusal of the first image of `body` that cannot be read, or undefined when every one can (or there are none). */
export function imagesRefusal(body: unknown): string | undefined {
  for (const image of inlineImages(body)) {
    const problem = imageProblem(image.data);
    if (problem !== undefined) return `the image at ${image.where} ${problem}`;
  }
  return undefined;
}
