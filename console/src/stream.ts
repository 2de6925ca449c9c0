/**
 * POSTs JSON to this node and reads the answer as server-sent events (pull progress, chat tokens),
 * through the api module so the key and content type go with it. Returns the response once its
 * body is read to the end; a non-success status throws the node's message before any event.
 */
import { apiFetch, ensureOk } from "./api.ts";
import { readSseBody, type SseMessage } from "./sse.ts";

export async function postSse(
  path: string,
  json: unknown,
  signal: AbortSignal,
  onHeaders: (res: Response) => void,
  onEvent: (m: SseMessage) => void,
): Promise<void> {
  const res = await ensureOk(await apiFetch(path, { json, signal }));
  onHeaders(res);
  if (!res.body) return;
  await readSseBody(res.body, onEvent);
}
