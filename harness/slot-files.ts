/** What a test node keeps of its conversations' KV caches (`pool/slot-cache.ts`), as tests and benches read it. */
import { existsSync, readdirSync } from "node:fs";
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

/**
 * Unloads every model (Lemonade's `/api/v1/unload`), which saves their slots, and waits until none
 * is loaded; the ms it took. `loadedFirst`: a model the node loads by itself (its `--model`, at
 * start), waited for first: a start's load may come after its content identity is known, and an
 * unload before it lets nothing go.
 */
export async function unloadAll(node: TestNode, loadedFirst?: string): Promise<number> {
  if (loadedFirst !== undefined) await waitFor(async () => (await loaded(node)).some((m) => m.model_name === loadedFirst), { what: `${loadedFirst} to be loaded`, timeoutMs: 120_000 });
  // A load under way is not among what an unload lets go: it is waited for first.
  await waitFor(async () => (await loaded(node)).every((m) => m.state === "ready"), { what: "the models loading to be ready", timeoutMs: 120_000 });
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

/**
 * `model`'s server on `node` loaded again once its content identity is known, so it saves and
 * restores slots (the load at start may come before the identity; a server's slot folder is made
 * as it loads). For a mesh host too, which its group loads again at once: a request loads it if not.
 */
export async function keepsSlots(node: TestNode, model: string, identity: string): Promise<void> {
  const root = join(node.stateDir, SLOT_CACHE_DIR);
  const hasFolder = () => existsSync(root) && readdirSync(root).some((build) => existsSync(join(root, build, identity)));
  if (hasFolder()) return;
  const res = await post(node, "/api/v1/unload", { model_name: model });
  if (res.status !== 200) throw new Error(`unload: ${res.status} ${await res.text()}`);
  const ready = async () => (await loaded(node)).some((s) => s.model_name === model && s.state === "ready");
  await waitFor(
    async () => {
      if (!(await ready())) await (await post(node, "/v1/completions", { model, prompt: "hi", max_tokens: 1 })).arrayBuffer();
      return hasFolder() && (await ready());
    },
    { what: `${model}'s server to load again with a slot folder`, timeoutMs: 60_000 },
  );
}
