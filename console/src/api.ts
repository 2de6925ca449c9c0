/**
 * Every request the page makes goes through here: it adds the API key (kept in this tab's
 * sessionStorage only, sent as `Authorization: Bearer`) and JSON's content type to POSTs, and turns
 * a 401 into the key prompt: listeners hear it, the caller gets `Unauthorized`. Errors the node
 * answers with (`{error: {message}}` or `{status: "error", message}`) become `ApiError` with its message.
 */

import { errorText } from "./error-text.ts";

const KEY_ITEM = "mesh-console-key";

export class Unauthorized extends Error {
  constructor() {
    super("this node wants an API key");
  }
}

export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

type Listener = () => void;
const unauthorizedListeners = new Set<Listener>();
const keyListeners = new Set<Listener>();

function storage(): Storage | null {
  try {
    return window.sessionStorage;
  } catch {
    // Storage can be off (privacy settings): the key then lives only as long as the page.
    return null;
  }
}

let memoryKey: string | null = storage()?.getItem(KEY_ITEM) ?? null;

export const currentKey = (): string | null => memoryKey;

export function setKey(key: string | null): void {
  memoryKey = key;
  const s = storage();
  if (key === null) s?.removeItem(KEY_ITEM);
  else s?.setItem(KEY_ITEM, key);
  for (const l of keyListeners) l();
}

/** Hears every 401; returns the function that stops listening. */
export function onUnauthorized(listener: Listener): () => void {
  unauthorizedListeners.add(listener);
  return () => unauthorizedListeners.delete(listener);
}

/** Hears every change of the key (a new one entered). */
export function onKeyChange(listener: Listener): () => void {
  keyListeners.add(listener);
  return () => keyListeners.delete(listener);
}

export interface RequestOptions {
  method?: "GET" | "POST";
  /** Sent as JSON; its presence makes the request a POST. */
  json?: unknown;
  signal?: AbortSignal;
  /** Try this key instead of the kept one (the key form checks a key before keeping it). */
  key?: string;
}

/** The response of a request to this node; throws `Unauthorized` on 401 (after telling the listeners). */
export async function apiFetch(path: string, opts: RequestOptions = {}): Promise<Response> {
  const headers = new Headers();
  const key = opts.key ?? memoryKey;
  if (key) headers.set("Authorization", `Bearer ${key}`);
  const method = opts.method ?? (opts.json === undefined ? "GET" : "POST");
  if (method === "POST") headers.set("Content-Type", "application/json");
  const res = await fetch(path, {
    method,
    headers,
    body: method === "POST" ? JSON.stringify(opts.json ?? {}) : undefined,
    signal: opts.signal,
    cache: "no-store",
  });
  if (res.status === 401) {
    await res.body?.cancel().catch(() => undefined);
    if (opts.key === undefined) for (const l of unauthorizedListeners) l();
    throw new Unauthorized();
  }
  return res;
}

/** Throws `ApiError` with the node's message unless the response is a success. */
export async function ensureOk(res: Response): Promise<Response> {
  if (res.ok) return res;
  const body = await res.text().catch(() => "");
  throw new ApiError(errorText(res.status, res.statusText, body), res.status);
}

/** POSTs JSON and returns the parsed answer, or throws `ApiError` / `Unauthorized`. */
export async function postJson<T>(path: string, json: unknown, signal?: AbortSignal): Promise<T> {
  const res = await ensureOk(await apiFetch(path, { json, signal }));
  return (await res.json()) as T;
}

/** What to show for a failed request. */
export function describeError(err: unknown): string {
  if (err instanceof Unauthorized) return "An API key is needed.";
  if (err instanceof DOMException && err.name === "AbortError") return "Stopped.";
  if (err instanceof Error) return err.message;
  return String(err);
}
