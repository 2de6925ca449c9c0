/**
 * The Hugging Face Hub as every Hugging Face tool talks to it: the endpoint (`HF_ENDPOINT`) and
 * token (`HF_TOKEN`, else the file `huggingface-cli login` writes), a repository's file list with
 * each file's size and LFS SHA-256 from `GET /api/models/{repo}/tree/{revision}?recursive=true`
 * (paged through its `Link: <…>; rel="next"` header), and the `resolve` URL a file downloads from.
 * The token goes to the endpoint only; every call has a deadline and every answer a bound.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { PullError } from "./pull-error.ts";
import type { RepoFile } from "./hf-files.ts";

export interface HubConfig {
  /** HF_ENDPOINT, else https://huggingface.co; no trailing slash. */
  endpoint: string;
  /** HF_TOKEN, else the file HF_TOKEN_PATH, $HF_HOME/token or ~/.cache/huggingface/token holds. */
  token: string | undefined;
}

const DEFAULT_ENDPOINT = "https://huggingface.co";
// What a token may be: printable ASCII without spaces, so it can only ever be one header value.
const TOKEN = /^[\x21-\x7e]{1,4096}$/;

/** The Hub to talk to, as `huggingface_hub` reads it from the environment and its token file. */
export function hubConfigFromEnv(env: Record<string, string | undefined>, home: string): HubConfig {
  const raw = env.HF_ENDPOINT?.trim() || DEFAULT_ENDPOINT;
  let endpoint: URL;
  try {
    endpoint = new URL(raw);
  } catch {
    throw new Error(`HF_ENDPOINT "${raw}" is not a URL`);
  }
  if (endpoint.protocol !== "https:" && endpoint.protocol !== "http:") throw new Error(`HF_ENDPOINT "${raw}" must be an http(s) URL`);
  if (endpoint.username || endpoint.password || endpoint.search || endpoint.hash) throw new Error(`HF_ENDPOINT "${raw}" must be a plain URL (no credentials, query or fragment)`);
  return { endpoint: endpoint.href.replace(/\/+$/, ""), token: tokenFrom(env, home) };
}

/** The variables the token may come in, first first: the node removes each from its own environment, so no child inherits it. */
export const TOKEN_VARIABLES = ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"] as const;

function tokenFrom(env: Record<string, string | undefined>, home: string): string | undefined {
  const fromEnv = TOKEN_VARIABLES.map((v) => env[v]?.trim()).find(Boolean);
  if (fromEnv) return TOKEN.test(fromEnv) ? fromEnv : undefined;
  const hfHome = env.HF_HOME?.trim() || join(env.XDG_CACHE_HOME?.trim() || join(home, ".cache"), "huggingface");
  const file = env.HF_TOKEN_PATH?.trim() || join(hfHome, "token");
  if (!existsSync(file)) return undefined;
  let text: string;
  try {
    text = readFileSync(file, "utf8").trim();
  } catch {
    return undefined;
  }
  return TOKEN.test(text) ? text : undefined;
}

/** The header that carries the token, for requests to the endpoint only. */
export const authHeaders = (hub: HubConfig): Record<string, string> => (hub.token ? { authorization: `Bearer ${hub.token}` } : {});

const segments = (path: string) => path.split("/").map(encodeURIComponent).join("/");

/** Where a file of a repository downloads from (the Hub redirects it to its CDN). */
export function resolveUrl(hub: HubConfig, repo: string, revision: string, path: string): string {
  return `${hub.endpoint}/${segments(repo)}/resolve/${encodeURIComponent(revision)}/${segments(path)}`;
}

export function treeUrl(hub: HubConfig, repo: string, revision: string): string {
  return `${hub.endpoint}/api/models/${segments(repo)}/tree/${encodeURIComponent(revision)}?recursive=true`;
}

const API_DEADLINE_MS = 30_000;
/** Bounds on what a tree listing may make us hold: per page, pages, entries. */
const TREE_LIMITS = { pageBytes: 16 * 2 ** 20, pages: 100, entries: 50_000 };

const TreeEntry = z.object({
  type: z.string(),
  path: z.string().max(1024),
  size: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER).optional(),
  oid: z.string().optional(),
  lfs: z.object({ oid: z.string(), size: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER) }).optional(),
});
const TreePage = z.array(TreeEntry);

export interface HubFetchOptions {
  signal?: AbortSignal;
  fetchImpl?: typeof fetch;
}

/** Every file of `repo` at `revision`, with sizes and hashes; a refusal or absence is a PullError that says what to do. */
export async function listRepoFiles(hub: HubConfig, repo: string, revision: string, opts: HubFetchOptions = {}): Promise<RepoFile[]> {
  const files: RepoFile[] = [];
  let next: string | undefined = treeUrl(hub, repo, revision);
  const origin = new URL(hub.endpoint).origin;
  for (let page = 0; next !== undefined; page++) {
    if (page >= TREE_LIMITS.pages) throw new PullError("download_failed", `${repo} lists more than ${TREE_LIMITS.pages} pages of files; refusing to read more`);
    const res = await hubFetch(next, hub, opts);
    if (!res.ok) {
      await res.body?.cancel().catch(() => undefined);
      throw hubError(res, hub, repo, revision);
    }
    const entries = TreePage.safeParse(await readJsonBounded(res, TREE_LIMITS.pageBytes, next));
    if (!entries.success) throw new PullError("download_failed", `${next} did not answer with a file list: ${z.prettifyError(entries.error)}`);
    for (const e of entries.data) {
      if (e.type !== "file") continue;
      if (files.length >= TREE_LIMITS.entries) throw new PullError("download_failed", `${repo} lists more than ${TREE_LIMITS.entries} files; refusing to read more`);
      const sha256 = e.lfs && /^[0-9a-f]{64}$/.test(e.lfs.oid) ? e.lfs.oid : undefined;
      const gitOid = !e.lfs && e.oid && /^[0-9a-f]{40}$/.test(e.oid) ? e.oid : undefined;
      files.push({ path: e.path, size: e.lfs?.size ?? e.size ?? 0, sha256, gitOid });
    }
    next = nextPage(res.headers.get("link"), next);
    // The token goes to the endpoint only: a next page elsewhere is not followed.
    if (next !== undefined && new URL(next).origin !== origin) throw new PullError("download_failed", `${repo}'s file list continues at another host (${new URL(next).host}); not followed`);
  }
  return files;
}

/**
 * Asks the Hub for a file without downloading it (the redirect is not followed), so that a gated
 * or missing file is reported before any byte of any file is fetched.
 */
export async function checkFileAccess(hub: HubConfig, repo: string, revision: string, path: string, opts: HubFetchOptions = {}): Promise<void> {
  const res = await hubFetch(resolveUrl(hub, repo, revision, path), hub, opts, "HEAD");
  await res.body?.cancel().catch(() => undefined);
  // 5xx and the like: the download tries again and says what it met.
  if (res.status === 401 || res.status === 403 || res.status === 404) throw hubError(res, hub, repo, revision, path);
}

async function hubFetch(url: string, hub: HubConfig, opts: HubFetchOptions, method = "GET"): Promise<Response> {
  const signal = opts.signal ? AbortSignal.any([opts.signal, AbortSignal.timeout(API_DEADLINE_MS)]) : AbortSignal.timeout(API_DEADLINE_MS);
  try {
    return await (opts.fetchImpl ?? fetch)(url, { method, headers: { ...authHeaders(hub), accept: "application/json" }, redirect: "manual", signal });
  } catch (err) {
    opts.signal?.throwIfAborted();
    const why = (err as Error).name === "TimeoutError" ? `no answer within ${API_DEADLINE_MS / 1000} s` : (err as Error).message;
    throw new PullError("download_failed", `could not reach the Hugging Face Hub at ${hub.endpoint} (${why}); check the network or HF_ENDPOINT`, { cause: err });
  }
}

/** The error a refusal from the Hub means, by its `X-Error-Code` (as huggingface_hub reads it), else its status. */
function hubError(res: Response, hub: HubConfig, repo: string, revision: string, path?: string): PullError {
  const code = res.headers.get("x-error-code");
  const what = path === undefined ? repo : `${repo}/${path}`;
  const login = "set HF_TOKEN or run `huggingface-cli login`";
  if (code === "GatedRepo" || ((res.status === 401 || res.status === 403) && code !== "RepoNotFound")) {
    const hint = hub.token ? `the token given has no access to it: accept its terms on the model's page, or ${login} with a token that has access` : login;
    return new PullError("gated", `${what} is gated or private: ${hint}`);
  }
  if (code === "RepoNotFound") {
    const hint = hub.token ? "check the name" : `check the name; if it is private, ${login}`;
    return new PullError("not_found", `no repository ${repo} on ${hub.endpoint}: ${hint}`);
  }
  if (code === "RevisionNotFound") return new PullError("not_found", `${repo} has no revision ${revision}`);
  if (res.status === 404) return new PullError("not_found", path === undefined ? `no repository ${repo} (or revision ${revision}) on ${hub.endpoint}` : `${repo} has no file ${path} at ${revision}`);
  return new PullError("download_failed", `${hub.endpoint} answered ${res.status} for ${what}`);
}

/** Reads a JSON body of at most `limit` bytes. */
async function readJsonBounded(res: Response, limit: number, url: string): Promise<unknown> {
  const stated = Number(res.headers.get("content-length") ?? NaN);
  if (stated > limit) {
    await res.body?.cancel().catch(() => undefined);
    throw new PullError("download_failed", `${url} answered ${stated} bytes, more than the ${limit} a file list may be`);
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  if (res.body) {
    for await (const chunk of res.body) {
      size += chunk.length;
      if (size > limit) throw new PullError("download_failed", `${url} answered more than the ${limit} bytes a file list may be`);
      chunks.push(chunk);
    }
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch {
    throw new PullError("download_failed", `${url} did not answer with JSON`);
  }
}

/** The `rel="next"` target of a Link header, resolved against the page that sent it. */
export function nextPage(link: string | null, base: string): string | undefined {
  if (!link) return undefined;
  for (const part of link.split(",")) {
    const m = /^\s*<([^>]*)>\s*;(.*)$/.exec(part);
    if (m && /(?:^|;)\s*rel="?next"?\s*(?:;|$)/i.test(m[2]!)) {
      try {
        return new URL(m[1]!, base).href;
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}
