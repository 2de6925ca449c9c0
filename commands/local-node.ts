/**
 * What the model commands share: whether a node answers at --listen:--port (then they go through
 * it, so its pool and its announcements see the change), the key to send it, and the model store
 * as a node with these settings would scan it (for when none answers).
 */
import type { Config } from "../config/config.ts";
import { ModelStore } from "../models/model-store.ts";
import { storeRoots } from "../node/node.ts";
import { localUrl } from "./common.ts";

/** The node's URL when one answers there, else undefined. */
export async function localNode(config: Pick<Config, "listen" | "port">): Promise<string | undefined> {
  const url = localUrl(config);
  try {
    const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(2_000) });
    await res.body?.cancel();
    return res.ok ? url : undefined;
  } catch {
    return undefined;
  }
}

export function authHeaders(config: Pick<Config, "apiKeys">): Record<string, string> {
  return config.apiKeys[0] ? { authorization: `Bearer ${config.apiKeys[0]}` } : {};
}

/** The models dir and the other tools' stores, as the node would scan them. */
export function localStore(config: Pick<Config, "modelsDir" | "scanModelStores" | "modelStores">): ModelStore {
  return new ModelStore({ modelsDir: config.modelsDir, extraFiles: [], hasGpu: false, stores: storeRoots(config) });
}

/** The message of an error answer in any of our shapes (Lemonade's, OpenAI's, Ollama's). */
export async function errorText(res: Response): Promise<string> {
  const text = await res.text();
  try {
    const body = JSON.parse(text) as { message?: unknown; error?: unknown };
    if (typeof body.message === "string") return body.message;
    if (typeof body.error === "string") return body.error;
    const inner = (body.error as { message?: unknown } | undefined)?.message;
    if (typeof inner === "string") return inner;
  } catch {
    // not JSON: the text itself
  }
  return text.slice(0, 500) || `status ${res.status}`;
}
