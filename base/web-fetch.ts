/**
 * fetch for URLs from configuration, following redirects by hand so every hop is http(s): fetch
 * itself follows a redirect to `file:` and reads this disk, and to `data:`. Downloads of model
 * files have their own loop (models/url-download.ts: addresses pinned, credentials kept to their
 * origin); this is for the small JSON answers around them.
 */
const MAX_REDIRECTS = 10;
const WEB_SCHEMES: ReadonlySet<string> = new Set(["http:", "https:"]);

/** Why `url` is not one to fetch, or undefined. */
export const notWeb = (url: URL): string | undefined => (WEB_SCHEMES.has(url.protocol) ? undefined : `${url.protocol.replace(/:$/, "")} is not http or https`);

export async function fetchWeb(url: string, init: RequestInit = {}, fetchImpl: typeof fetch = fetch): Promise<Response> {
  let current = new URL(url);
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    const problem = notWeb(current);
    if (problem) throw new Error(hop === 0 ? `${url}: ${problem}` : `${url} redirects to ${current.href}: ${problem}`);
    const res = await fetchImpl(current, { ...init, redirect: "manual" });
    const location = res.headers.get("location");
    if (res.status < 300 || res.status >= 400 || !location) return res;
    await res.body?.cancel().catch(() => undefined);
    current = new URL(location, current);
  }
  throw new Error(`${url} redirects more than ${MAX_REDIRECTS} times`);
}
