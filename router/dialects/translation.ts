/**
 * What a dialect translator is (`dialects.ts` keeps the table of them): given a request's body, the
 * `/v1` request it becomes and how its answer is turned back, a refusal, or nothing to change.
 */
import type { JsonObject } from "../http/json.ts";

export interface Translation {
  /** The public path the request goes to instead (one of `INFERENCE_PATHS`). */
  path: string;
  body: JsonObject;
  /** The client's answer, from the answer of `path` (a broken stream already ended in that path's words). */
  answer(res: Response): Response | Promise<Response>;
}

/** A request's translation; undefined when it passes as it is, or the reason it cannot be served. */
export type Translator = (body: JsonObject) => Translation | { error: string } | undefined;
