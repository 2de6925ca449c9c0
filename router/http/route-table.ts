/**
 * Which routes the API has and with which methods (pure): the inference routes that name a model
 * in their body (the OpenAI and Anthropic `/v1` ones, and llama-server's own at the root, where its
 * clients call them), and the rest, so a wrong method on a known path answers 405 with `Allow`
 * while an unknown path stays 404. Lemonade's routes answer under each of its base URLs alike.
 */
import { LOCAL_PROOF_PATH } from "../../node/local-proof.ts";

/** `/v1` inference routes and the llama-server path each goes to. */
export const INFERENCE_ROUTES: Record<string, string> = {
  "/chat/completions": "/v1/chat/completions",
  "/completions": "/v1/completions",
  "/embeddings": "/v1/embeddings",
  "/rerank": "/v1/rerank",
  "/reranking": "/v1/rerank",
  "/responses": "/v1/responses",
  "/messages": "/v1/messages",
  "/messages/count_tokens": "/v1/messages/count_tokens",
};

/** llama-server's own model routes, public at the root as llama-server has them (its clients call `/tokenize`). */
export const LLAMA_ROUTES: Record<string, string> = {
  "/tokenize": "/tokenize",
  "/detokenize": "/detokenize",
  "/apply-template": "/apply-template",
};

/** Every public path of a POST that names its model in the body and is routed across the mesh. */
export const INFERENCE_PATHS: readonly string[] = [...Object.keys(INFERENCE_ROUTES).map((r) => `/v1${r}`), ...Object.keys(LLAMA_ROUTES)];

/** GET routes outside the inference table: ours, Ollama's (`router/dialects/ollama.ts`), the management API's (`router/dialects/management.ts`). */
const GET_PATHS = new Set(["/health", "/live", "/metrics", LOCAL_PROOF_PATH, "/api/status", "/v1/models", "/api/version", "/api/tags", "/api/ps", "/api/v1/models", "/api/v1/health", "/api/v1/stats", "/api/v1/system-info"]);

/** Ollama's inference routes (translated into OpenAI's and served the same way, counted in the metrics under their own path). */
export const OLLAMA_INFERENCE_PATHS: readonly string[] = ["/api/chat", "/api/generate", "/api/embed", "/api/embeddings"];

/** POST routes outside the inference table: Ollama's and the management API's (`/api/pull` streams a pull's progress). */
const POST_PATHS = new Set([...OLLAMA_INFERENCE_PATHS, "/api/show", "/api/pull", "/api/v1/load", "/api/v1/unload", "/api/v1/pull", "/api/v1/delete"]);

/** Ollama's other model-file routes: POST, and DELETE, which its client sends for `/api/delete` (the rest answer 501 to both). */
const POST_OR_DELETE_PATHS = new Set(["/api/delete", "/api/copy", "/api/create", "/api/push"]);

/**
 * Lemonade's base URLs, each serving the same routes (the management API and the OpenAI routes):
 * ours, `/api/v1`, and the others its current releases answer on too.
 */
export const LEMONADE_BASES: readonly string[] = ["/api/v1", "/api/v0", "/v0"];

/** `path` as under `/api/v1` when it is under another of Lemonade's base URLs (the same route answers it), else `path` (pure). */
export function asApiV1(path: string): string {
  for (const base of LEMONADE_BASES.slice(1)) if (path === base || path.startsWith(`${base}/`)) return `/api/v1${path.slice(base.length)}`;
  return path;
}

/** The methods `path` answers, or undefined for a path the API does not have. */
export function allowedMethods(given: string): readonly string[] | undefined {
  const path = asApiV1(given);
  if (INFERENCE_PATHS.includes(path) || POST_PATHS.has(path)) return ["POST"];
  // The OpenAI routes again under Lemonade's base URL (`router/dialects/openai-under-api.ts`).
  if (path.startsWith("/api/v1/") && Object.hasOwn(INFERENCE_ROUTES, path.slice("/api/v1".length))) return ["POST"];
  if (POST_OR_DELETE_PATHS.has(path)) return ["POST", "DELETE"];
  if (GET_PATHS.has(path)) return ["GET", "HEAD"];
  for (const models of ["/v1/models/", "/api/v1/models/"]) if (path.startsWith(models) && path.length > models.length) return ["GET", "HEAD"];
  return undefined;
}

/** Ollama's routes under `/api` (beside ours, `/api/v1/*` and `/api/status`): its clients read `error` as a string. */
export const OLLAMA_ROUTES: readonly string[] = ["version", "tags", "ps", "show", "chat", "generate", "embed", "embeddings", "pull", "delete", "copy", "create", "push"];

/** Whether `path` is one of Ollama's routes, whose errors take its shape. */
export const isOllamaPath = (path: string): boolean => path.startsWith("/api/") && OLLAMA_ROUTES.includes(path.slice(5));
