/**
 * What a mesh member may ask of this node's API (pure): the inference routes, the model list and
 * the models it has loaded with when each unloads (Ollama's `/api/ps`, which a node that forwards
 * to it shows its clients), nothing that administers the node (`/api/*` loads, unloads and status,
 * `/metrics`, `/health`).
 * Members share compute and model files; they do not administer each other. The serving node
 * applies this to every request a peer sends over an HTTP stream, whatever its headers say, before
 * the API sees it.
 *
 * The path is judged as the API will route it: parsed by the URL parser against the same base the
 * stream's server uses, and refused when parsing changes it (`/v1/../api`, `\`, `%2e%2e`), so no
 * spelling reaches a route the allowlist did not name.
 */

/** POST routes a member may use: the inference routes of `router/http/route-table.ts` (`INFERENCE_PATHS`). */
export const MEMBER_INFERENCE_PATHS: readonly string[] = [
  "/v1/chat/completions",
  "/v1/completions",
  "/v1/embeddings",
  "/v1/rerank",
  "/v1/reranking",
  "/v1/responses",
  "/v1/messages",
  "/v1/messages/count_tokens",
  "/tokenize",
  "/detokenize",
  "/apply-template",
];

/** The model list; `/v1/models/{id}` names one model. */
const MODELS_PATH = "/v1/models";
/** The models loaded here and when each unloads, as Ollama lists them. */
export const MEMBER_LOADED_PATH = "/api/ps";
export const MAX_MEMBER_PATH = 2048;
/** The base the HTTP-stream server builds each request's URL on. */
export const MEMBER_URL_BASE = "http://mesh.local";

export type MemberVerdict = { ok: true } | { ok: false; reason: string };

const refuse = (reason: string): MemberVerdict => ({ ok: false, reason });

/** Bytes a plain origin-form path never holds: controls, space, `\`, `#`, non-ASCII (clients percent-encode it). */
const NOT_IN_PATH = /[^\x21-\x7e]|[\\#]/;

export function memberMayRequest(method: string, path: string): MemberVerdict {
  if (path.length === 0 || path.length > MAX_MEMBER_PATH) return refuse(`a path of ${path.length} characters (at most ${MAX_MEMBER_PATH})`);
  if (!path.startsWith("/") || path.startsWith("//")) return refuse("not a plain origin-form path (/...)");
  if (NOT_IN_PATH.test(path)) return refuse("a character a plain path does not hold");
  const query = path.indexOf("?");
  const rawPath = query === -1 ? path : path.slice(0, query);
  let url: URL;
  try {
    url = new URL(`${MEMBER_URL_BASE}${path}`);
  } catch {
    return refuse("not a valid path");
  }
  if (url.origin !== MEMBER_URL_BASE || url.pathname !== rawPath) return refuse("a path that changes when normalized");
  let decoded: string;
  try {
    decoded = decodeURIComponent(rawPath);
  } catch {
    return refuse("bad percent-encoding");
  }
  // What a router that decodes before matching sees must be as plain as the raw path.
  if (/[\x00-\x1f\x7f\\]/.test(decoded) || /(^|\/)\.\.?(\/|$)/.test(decoded) || decoded.includes("//")) {
    return refuse("an empty segment, a dot segment or a percent-encoded separator");
  }
  if (method === "POST" && MEMBER_INFERENCE_PATHS.includes(rawPath)) return { ok: true };
  if (method === "GET" && (rawPath === MODELS_PATH || rawPath === MEMBER_LOADED_PATH || (rawPath.startsWith(`${MODELS_PATH}/`) && rawPath.length > MODELS_PATH.length + 1 && !rawPath.endsWith("/")))) {
    return { ok: true };
  }
  return refuse("only the inference routes, the model list and the loaded models are open to mesh members");
}
