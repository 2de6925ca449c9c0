/** What a test node keeps of its conversations' KV caches (`pool/slot-cache.ts`), as tests and benches read it. */
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { SLOT_CACHE_DIR } from "../pool/slot-cache.ts";
import { loaded, post } from "./api.ts";
import type { TestNode } from "./node.ts";
import { waitFor } from "./wait.ts";

/** Waits until the node has worked out `model`'s content identity (which keys its saved slots), as `/v1/models` shows it. */
export async function identityKnown(node: TestNode, model: string, timeoutMs?: number): Promise<string> {
  const identity = async () => ((await (await fetch(`${node.url}/v1/models/${model}`)).json()) as { mesh?: { content_sha256: string | null } }).mesh?.content_sha256 ?? undefined;
  return waitFor(identity, { what: `${model}'s content identity`, ...(timeoutMs ? { timeoutMs } : {}) });
}

/** Unloads every model (Lemonade's `/api/v1/unload`), which saves their slots, and waits until none is loaded; the ms it took. */
export async function unloadAll(node: TestNode): Promise<number> {
  const t = performance.now();
  const res = await post(node, "/api/v1/unload", {});
  if (res.status !== 200) throw new Error(`unload: ${res.status} ${await res.text()}`);
  await waitFor(async () => (await loaded(node)).length === 0, { what: "the models to unload" });
  return performance.now() - t;
}

/** The saved slot files under the node's state dir, every build and model (paths; not the sums beside them). */
export function savedSlots(node: Pick<TestNode, "stateDir">): string[] {
  const root = join(node.stateDir, SLOT_CACHE_DIR);
  const list = (dir: string) => {
    try {
      return readdirSync(dir).map((name) => join(dir, name));
    } catch {
      return [];
    }
  };
  return list(root)
    .flatMap(list)
    .flatMap(list)
    .filter((path) => path.endsWith(".bin"));
}
