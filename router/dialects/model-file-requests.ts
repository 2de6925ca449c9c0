/**
 * What the pull and delete routes of each API (`ollama-pull.ts`, `lemonade-pull.ts`) share: their
 * JSON body read against a schema, and the HTTP status an error of the model admin answers with.
 */
import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { z } from "zod";
import type { AdminError } from "../../node/model-admin.ts";

/** Characters of a model name or reference in a request (a reference may be a URL). */
export const MAX_NAME = 2048;

/** The request's JSON body as `schema` reads it, or the error to answer with (400). */
export async function readJsonBody<T>(c: Context, schema: z.ZodType<T>): Promise<{ ok: true; value: T } | { ok: false; error: string }> {
  let json: unknown;
  try {
    json = JSON.parse(await c.req.text());
  } catch (err) {
    return { ok: false, error: `request body is not valid JSON: ${(err as Error).message}` };
  }
  const parsed = schema.safeParse(json);
  return parsed.success ? { ok: true, value: parsed.data } : { ok: false, error: `invalid request: ${z.prettifyError(parsed.error)}` };
}

/** The HTTP status an admin error answers with; a client that left gets a code no client reads. */
export const httpStatusOf = (e: AdminError): ContentfulStatusCode => (e.status === 499 ? 503 : e.status);
