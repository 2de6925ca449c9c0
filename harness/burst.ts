/** Load that presses a model's servers, so the mesh adds a replica of it (`placement/replicas.ts`). */
import type { TestNode } from "./node.ts";
import { ANSWERED_BY_HEADER } from "../mesh/mesh-headers.ts";

/**
 * Keeps `width` chats in flight at the host until `stop` aborts: each client finishes the chat it
 * has in flight and stops (no client is cut mid-answer). Resolves with
 * their statuses, and notes who answered.
 */
export function burst(via: TestNode, model: string, width: number, stop: AbortSignal, answeredBy: Set<string>): Promise<number[]> {
  const one = async (): Promise<number[]> => {
    const statuses: number[] = [];
    while (!stop.aborted) {
      const body = JSON.stringify({ model, messages: [{ role: "user", content: "count to twenty" }], max_tokens: 48 });
      const res = await fetch(`${via.url}/v1/chat/completions`, { method: "POST", body, signal: AbortSignal.timeout(60_000) }).catch(() => undefined);
      if (!res) break;
      await res.arrayBuffer().catch(() => undefined);
      statuses.push(res.status);
      const by = res.headers.get(ANSWERED_BY_HEADER);
      if (res.ok && by) answeredBy.add(by);
    }
    return statuses;
  };
  return Promise.all(Array.from({ length: width }, one)).then((all) => all.flat());
}
