/**
 * What a member is told in words (an error, a load failure it hears of) names files by their names
 * only: where this node keeps them (its user's home, its models and state dirs) is not the mesh's
 * business (pure). An absolute path of two parts or more that begins a word becomes its last part;
 * URLs and this API's own routes (`/v1/...`, `/api/...`) are left alone.
 */

/** A path at the start of the text or after a space, quote, bracket or punctuation (not `//` of a URL). */
const ABSOLUTE_PATH = /(^|[\s"'`(=:,;<>[])(\/(?!\/)(?:[^\s"'`()/,;<>\]]+\/)+([^\s"'`()/,;<>\]]+))/g;
const API_ROUTE = /^\/(?:v1|api)\//;

export function hidePaths(text: string): string {
  return text.replace(ABSOLUTE_PATH, (whole: string, before: string, path: string, last: string) => (API_ROUTE.test(path) ? whole : `${before}${last}`));
}

/** The same over every string of a JSON answer (an error body), so escapes in its text hide nothing. */
export function hidePathsInJson(text: string): string {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return hidePaths(text);
  }
  const walk = (v: unknown): unknown =>
    typeof v === "string" ? hidePaths(v) : Array.isArray(v) ? v.map(walk) : v && typeof v === "object" ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)])) : v;
  return JSON.stringify(walk(body));
}
