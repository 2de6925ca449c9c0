/**
 * What a dialect that rewrites a whole answer (a Responses object, legacy logprobs, Ollama's JSON,
 * Anthropic's error shape) needs of it: its body read whole up to a bound (it may come from a member
 * of the mesh, which sends what it likes: past the bound the read stops and says so), and the
 * headers for the body that replaces it.
 */

/** A whole answer a dialect rewrites: far above any completion's JSON (thousands of tokens with 20 logprobs each fit). */
export const MAX_REWRITTEN_ANSWER_BYTES = 64 * 1024 * 1024;
/** An error's body: a message, not an answer. */
export const MAX_ERROR_BODY_BYTES = 1024 * 1024;

export class AnswerTooLarge extends Error {}

/** `res`'s body as text, read no further than `max` bytes (then it is cancelled, and this throws `AnswerTooLarge`). */
export async function textWithin(res: Response, max: number): Promise<string> {
  if (!res.body) return "";
  const reader = res.body.getReader();
  const pieces: Uint8Array[] = [];
  let bytes = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    bytes += value.length;
    if (bytes > max) {
      await reader.cancel().catch(() => undefined);
      throw new AnswerTooLarge(`the model's answer is over ${max} bytes, more than this node rewrites into the request's API`);
    }
    pieces.push(value);
  }
  return Buffer.concat(pieces).toString("utf8");
}

/** `res`'s body as JSON, within `max` bytes; undefined when it is not JSON. */
export async function jsonWithin(res: Response, max: number): Promise<unknown> {
  const text = await textWithin(res, max);
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** `res`'s headers for a new body in their place: those that described the old one dropped, and its content type when given. */
export function headersForNewBody(res: Response, contentType?: string): Headers {
  const headers = new Headers(res.headers);
  for (const h of ["content-length", "content-encoding"]) headers.delete(h);
  if (contentType !== undefined) headers.set("content-type", contentType);
  return headers;
}
