/**
 * A llama.cpp release as GitHub's releases API describes it (`GET {api}/repos/{repo}/releases/tags/{tag}`):
 * its assets with their download URLs, sizes and SHA-256 digests, and its source tarball. The API
 * base is configurable, so a mirror (or a test's local server) can stand in for api.github.com.
 */
import { z } from "zod";
import { sleep } from "../models/model-transfer.ts";
import type { ReleaseAsset } from "./assets.ts";
import { fetchWeb } from "../base/web-fetch.ts";

export const LLAMA_REPO = "ggml-org/llama.cpp";
export const GITHUB_API = "https://api.github.com";

const ReleaseSchema = z.object({
  tag_name: z.string(),
  tarball_url: z.string().url().nullish(),
  assets: z.array(
    z.object({
      name: z.string(),
      browser_download_url: z.string().url(),
      size: z.number().int().nonnegative(),
      digest: z.string().nullish(),
    }),
  ),
});

export interface LlamaRelease {
  tag: string;
  assets: ReleaseAsset[];
  tarballUrl: string | undefined;
}

/** Parses the API's answer (pure), or says what was wrong with it. */
export function parseRelease(json: unknown): LlamaRelease {
  const parsed = ReleaseSchema.safeParse(json);
  if (!parsed.success) throw new Error(`the releases API answered something that is not a release: ${z.prettifyError(parsed.error)}`);
  const r = parsed.data;
  return {
    tag: r.tag_name,
    tarballUrl: r.tarball_url ?? undefined,
    assets: r.assets.map((a) => ({ name: a.name, url: a.browser_download_url, size: a.size, digest: a.digest ?? undefined })),
  };
}

const TRIES = 3;

export async function fetchRelease(apiBase: string, tag: string, fetchImpl: typeof fetch = fetch): Promise<LlamaRelease> {
  const url = `${apiBase.replace(/\/+$/, "")}/repos/${LLAMA_REPO}/releases/tags/${encodeURIComponent(tag)}`;
  for (let attempt = 1; ; attempt++) {
    let res: Response;
    try {
      res = await fetchWeb(url, { headers: { accept: "application/vnd.github+json", "user-agent": "mesh" }, signal: AbortSignal.timeout(30_000) }, fetchImpl);
    } catch (err) {
      if (attempt >= TRIES) throw new Error(`cannot reach ${url} (${(err as Error).message})`);
      await sleep(1000 * 2 ** (attempt - 1));
      continue;
    }
    if (res.status === 404) throw new Error(`${url} answered 404: there is no llama.cpp release ${tag} there (check --llama-release and --llama-mirror)`);
    if (res.status >= 500 && attempt < TRIES) {
      await sleep(1000 * 2 ** (attempt - 1));
      continue;
    }
    if (!res.ok) throw new Error(`${url} answered ${res.status}${res.status === 403 ? " (rate limited? try again later, or use --llama-mirror)" : ""}`);
    return parseRelease(await res.json());
  }
}
