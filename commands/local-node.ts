/**
 * What the model commands share: whether a node answers at --listen:--port (then they go through
 * it, so its pool and its announcements see the change), the key to send it (only to our own node), and the model store
 * as a node with these settings would scan it (for when none answers).
 */
import type { Config } from "../config/config.ts";
import { ModelStore } from "../models/model-store.ts";
import { storeRoots } from "../node/node.ts";
import { concreteHost, LOCAL_PROOF_FILE, LOCAL_PROOF_PATH, newChallenge, parseSocket, proofHolds, readProofKey, socketText, type SocketAddress } from "../node/local-proof.ts";
import { CommandError, localUrl } from "./common.ts";

export interface LocalNode {
  /** Where it answered: the concrete address the CLI dialed (a name resolved), which every later request goes to. */
  url: string;
  /** The API key, for a node that proved it is the one of our state dir; none is needed otherwise. */
  headers: Record<string, string>;
}

/** The concrete address the CLI dials for --listen:--port (a wildcard's loopback, a name's first address), or none when the name does not resolve. */
async function dialTarget(config: Pick<Config, "listen" | "port">): Promise<SocketAddress | undefined> {
  const host = new URL(localUrl(config)).hostname;
  try {
    return { host: await concreteHost(host), port: config.port };
  } catch {
    return undefined;
  }
}

/**
 * The node answering at --listen:--port, if one does. With an API key to send, it must first prove
 * it is the node of our state dir, listening where we dialed (`node/local-proof.ts`): another local
 * user may hold the port, on this address or another.
 */
export async function localNode(config: Pick<Config, "listen" | "port" | "apiKeys" | "stateDir">): Promise<LocalNode | undefined> {
  const dialed = await dialTarget(config);
  if (!dialed) return undefined;
  const url = `http://${socketText(dialed)}`;
  try {
    const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(2_000) });
    await res.body?.cancel();
    if (!res.ok) return undefined;
  } catch {
    return undefined;
  }
  const key = config.apiKeys[0];
  if (!key) return { url, headers: {} };
  await proveOwnNode(url, dialed, config);
  return { url, headers: { authorization: `Bearer ${key}` } };
}

async function proveOwnNode(url: string, dialed: SocketAddress, config: Pick<Config, "stateDir">): Promise<void> {
  const notOurs = (why: string) =>
    new CommandError(`the process answering at ${url} ${why}, so it is not known to be the node of the state dir ${config.stateDir}: the API key is not sent to it (is the node run with another --state-dir?)`);
  const proofKey = readProofKey(config.stateDir);
  if (!proofKey) throw notOurs(`has no ${LOCAL_PROOF_FILE} in the state dir (a node started before this version writes none: restart it)`);
  const challenge = newChallenge();
  let answer: { proof?: unknown; bound?: unknown } | undefined;
  try {
    const res = await fetch(`${url}${LOCAL_PROOF_PATH}?challenge=${challenge}&dialed=${encodeURIComponent(socketText(dialed))}`, { signal: AbortSignal.timeout(5_000) });
    answer = res.ok ? ((await res.json()) as typeof answer) : undefined;
  } catch {
    answer = undefined;
  }
  const bound = parseSocket(typeof answer?.bound === "string" ? answer.bound : undefined);
  if (typeof answer?.proof !== "string" || !bound || !proofHolds(proofKey, challenge, bound, dialed, answer.proof)) {
    throw notOurs(`could not prove it holds the key in the state dir and listens at ${socketText(dialed)}`);
  }
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
