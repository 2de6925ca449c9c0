/**
 * The HTTP API under fuzzing, in-process: the real Hono app (`createApp`, as main.ts composes it,
 * with `fromOutside` in front) over a real ModelStore and Pool, given arbitrary methods, paths,
 * headers (Host, Origin, Authorization, Content-Type and any others `Headers` accepts) and bodies
 * (bytes, JSON, objects naming random models, deep nesting, big strings under and over the limit).
 * Every request is answered within a deadline; never a 5xx but the documented 503 (busy) and 501
 * (model pulls, not there yet); every error in OpenAI's shape with a message (Ollama's routes: its
 * `{"error": "..."}`); no page gets through a foreign Host or changes state from a
 * foreign Origin; with an API key set, nothing under /v1 or /api succeeds without it; and nothing
 * ever starts loading: the models dir is empty and the llama.cpp binaries do not
 * exist, so no request can get as far as a process.
 */
import { isAnthropicPath } from "../../router/dialects/anthropic-errors.ts";
import { afterAll, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { join } from "node:path";
import type { LlamaBinaries } from "../../llama/binaries.ts";
import { createLog } from "../../base/log.ts";
import type { MeshStatus } from "../../mesh/status.ts";
import { ModelStore } from "../../models/model-store.ts";
import { Pool } from "../../pool/pool.ts";
import { fromOutside, presentedKey } from "../../router/http/api-keys.ts";
import { createApp } from "../../router/app.ts";
import { INFERENCE_ROUTES } from "../../router/dialects/openai.ts";
import { ServingCore } from "../../router/serving/serving.ts";
import { withDeadline } from "../../harness/wait.ts";
import { tempDirs } from "../../harness/transfer.ts";
import { holdsAsync } from "./settings.ts";
import { FORWARDED_HEADER } from "../../mesh/mesh-headers.ts";

const RUNS = 250;
const HANG_MS = 5_000;
const MAX_BODY = 64 * 1024;
const KEY = "sk-fuzz-key";
const CORS_ORIGIN = "http://localhost:3000";

const dirs = tempDirs("mesh-fuzz-http-");
afterAll(() => dirs.remove());

const nowhere = join(dirs.fresh("no-llama"), "missing");
const NO_BINARIES: LlamaBinaries = { dir: nowhere, llamaServer: join(nowhere, "llama-server"), rpcServer: join(nowhere, "rpc-server") };

function node(apiKeys: string[]) {
  const store = new ModelStore({ modelsDir: dirs.fresh("models"), extraFiles: [], hasGpu: false });
  const pool = new Pool({
    llama: NO_BINARIES,
    stateDir: dirs.fresh("state"),
    maxLoadedModels: 1,
    idleUnloadMs: 0,
    loadTimeoutMs: 1_000,
    defaultCtxSize: 512,
    defaultArgs: "",
    log: createLog("text", () => {}),
  });
  // Counted, so a property can say no request got as far as asking for a model.
  const asked = { loads: 0 };
  const { acquire, load } = { acquire: pool.acquire.bind(pool), load: pool.load.bind(pool) };
  pool.acquire = (...args) => (asked.loads++, acquire(...args));
  pool.load = (...args) => (asked.loads++, load(...args));
  const serving = new ServingCore({
    store,
    pool,
    version: "fuzz",
    mesh: { status: () => ({ state: "running", nodeId: null, peers: [] }) as MeshStatus },
    routing: undefined,
  });
  const app = createApp(serving, { metrics: { pool }, maxBodyBytes: MAX_BODY, backends: ["cpu"], apiKeys, browser: { listen: "127.0.0.1", corsOrigins: [CORS_ORIGIN] } });
  // As main.ts serves it: the forwarded marker is stripped from anything not from the mesh.
  const fetch = async (req: Request, forwarded: boolean) => app.fetch(forwarded ? req : fromOutside(req));
  return { fetch, pool, asked };
}

/** Printable Latin-1 text, as header values may hold (no CR, LF or NUL: `Headers` refuses them). */
const headerText = fc.string({ unit: fc.integer({ min: 0x20, max: 0xff }).filter((c) => c !== 0x7f).map((c) => String.fromCharCode(c)), maxLength: 80 });
const token = fc.stringMatching(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,24}$/);

/** Ollama's routes, whose errors are its `{"error": "..."}`. */
const OLLAMA_PATHS = ["/api/version", "/api/tags", "/api/ps", "/api/show", "/api/chat", "/api/generate", "/api/embed", "/api/embeddings", "/api/pull", "/api/delete", "/api/copy"];

const KNOWN_PATHS = [
  "/health",
  "/metrics",
  "/api/status",
  "/api/v1/health",
  "/api/v1/stats",
  "/api/v1/models",
  "/api/v1/load",
  "/api/v1/unload",
  "/api/v1/pull",
  "/api/v1/delete",
  "/api/v1/system-info",
  "/api/v1/chat/completions",
  "/live",
  "/tokenize",
  "/detokenize",
  "/apply-template",
  "/v1/messages/count_tokens",
  ...OLLAMA_PATHS,
  "/v1/models",
  "/v1/models/some/model",
  ...Object.keys(INFERENCE_ROUTES).map((r) => `/v1${r}`),
];

const path = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...KNOWN_PATHS) },
  {
    weight: 3,
    arbitrary: fc
      .tuple(fc.constantFrom(...KNOWN_PATHS), fc.constantFrom("", "/", "/..", "/../api/v1/load", "/%2e%2e/api/status", "//", "?x=1", "?model=a&&", "#frag", "/x".repeat(500), ";a=b"))
      .map(([p, s]) => p + s),
  },
  { weight: 2, arbitrary: fc.webPath().map((p) => (p.startsWith("/") ? p : `/${p}`)) },
  { weight: 1, arbitrary: fc.constantFrom("/V1/models", "/v1", "/api", "/api/v1", "/", "/v1/models/", "/v1/models/%00", "/v1/models/..%2f..%2fetc%2fpasswd") },
);

const method = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom("GET", "POST", "POST", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD") },
  { weight: 1, arbitrary: fc.constantFrom("post", "get", "Post", "PROPFIND", "QUERY") },
);

/** `Host`s a rebinding page (or a page on 0.0.0.0) would send: never this node's. */
const FOREIGN_HOSTS = ["rebind.attacker.example", "rebind.attacker.example:9337", "127.0.0.1.nip.io", "0.0.0.0:9337", "[::1", ":9337", ""];
const hostHeader = fc.oneof(
  { weight: 16, arbitrary: fc.constantFrom("127.0.0.1:9337", "localhost:9337", "[::1]:9337", "127.0.0.1", "localhost") },
  { weight: 2, arbitrary: fc.constantFrom(...FOREIGN_HOSTS, "localhost:99999", "user@127.0.0.1") },
  { weight: 1, arbitrary: headerText },
);

/** Origins of pages that are neither the node's own nor a `--cors-origin`. */
const FOREIGN_ORIGINS = ["null", "http://evil.example", "file://", "http://127.0.0.1:9338"];
const originHeader = fc.constantFrom(...FOREIGN_ORIGINS, "http://127.0.0.1:9337", "http://localhost:9337", CORS_ORIGIN, "HTTP://LOCALHOST:3000");

const contentType = fc.oneof(
  { weight: 4, arbitrary: fc.constant("application/json") },
  fc.constantFrom("application/json", "application/json; charset=utf-8", "APPLICATION/JSON", "text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonx", ""),
  headerText,
);

const authorization = fc.oneof(
  { weight: 3, arbitrary: fc.constant(`Bearer ${KEY}`) },
  fc.constantFrom(`Bearer ${KEY}`, `bearer ${KEY}`, `Bearer  ${KEY} `, "Bearer wrong", "Bearer", "Bearer ", `Basic ${btoa(`user:${KEY}`)}`, `Token ${KEY}`, KEY),
  headerText,
);

/** Usually present (`often`) or usually absent, so most requests get past the guards to the handlers. */
const often = <T>(a: fc.Arbitrary<T>) => fc.option(a, { freq: 8, nil: undefined });
const rarely = <T>(a: fc.Arbitrary<T>) => fc.oneof({ weight: 4, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: a });

/** The headers of one request: the ones that decide things, each maybe, and arbitrary others. */
const headers = fc.record({
  host: often(hostHeader),
  origin: rarely(fc.oneof(originHeader, headerText)),
  "content-type": often(contentType),
  authorization: fc.option(authorization, { freq: 2, nil: undefined }),
  "x-api-key": rarely(fc.oneof(fc.constant(KEY), headerText)),
  "access-control-request-method": rarely(fc.constantFrom("POST", "GET", "PUT")),
  "access-control-request-headers": rarely(fc.oneof(fc.constantFrom("content-type", "authorization, content-type", "x-evil"), headerText)),
  "transfer-encoding": rarely(fc.constantFrom("chunked", "gzip", "identity")),
  "content-encoding": rarely(fc.constantFrom("gzip", "br", "identity")),
  extra: fc.array(fc.tuple(token, headerText), { maxLength: 6 }),
});

const modelName = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.constantFrom("", " ", "../../etc/passwd", "/etc/passwd", "tiny", "tiny.gguf", "a/b", "x".repeat(5000), "\u0000", "model\nname"),
);

const encoder = new TextEncoder();
const json = (v: unknown) => encoder.encode(JSON.stringify(v) ?? "null");

/** A request body: bytes, JSON, request-like objects with odd fields, deep nesting, big strings. */
const body: fc.Arbitrary<Uint8Array | undefined> = fc.oneof(
  { weight: 1, arbitrary: fc.constant(undefined) },
  { weight: 2, arbitrary: fc.uint8Array({ maxLength: 512 }) },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 4 }).map(json) },
  {
    weight: 6,
    arbitrary: fc
      .record(
        {
          model: fc.oneof({ weight: 4, arbitrary: modelName }, { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) }),
          model_name: fc.oneof({ weight: 4, arbitrary: modelName }, { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 2 }) }),
          messages: fc.oneof(fc.constant([{ role: "user", content: "hi" }]), fc.jsonValue({ maxDepth: 3 })),
          input: fc.jsonValue({ maxDepth: 2 }),
          stream: fc.oneof(fc.boolean(), fc.jsonValue({ maxDepth: 1 })),
          ctx_size: fc.oneof({ weight: 4, arbitrary: fc.nat() }, fc.integer(), fc.double(), fc.jsonValue({ maxDepth: 1 })),
          llamacpp_args: fc.oneof(
            fc.constantFrom("--threads 2", "--mcp-servers-json '{}'", "-m /etc/passwd", "--ctx-size 99999999999", "-ngl 99 --flash-attn on", "--threads '2", "--slot-save-path /tmp"),
            fc.array(fc.constantFrom("--threads", "-t", "--batch-size", "-ngl", "--ctx-size", "--flash-attn", "-fa", "--cache-type-k", "q8_0", "on", "1", "-1", "99999999999999999999", "'", '"', "\\", "--", "-", "=")).map((a) => a.join(" ")),
            fc.string({ maxLength: 100 }),
          ),
          llamacpp_backend: fc.oneof({ weight: 4, arbitrary: fc.constant("cpu") }, fc.constantFrom("cuda", ""), fc.string({ maxLength: 20 })),
          pinned: fc.oneof({ weight: 4, arbitrary: fc.boolean() }, fc.jsonValue({ maxDepth: 1 })),
          extra: fc.dictionary(fc.string({ maxLength: 12 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 }),
        },
        { requiredKeys: [] },
      )
      .map(({ extra, ...fields }) => json({ ...extra, ...fields })),
  },
  {
    weight: 1,
    arbitrary: fc.integer({ min: 1, max: 30_000 }).map((n) => encoder.encode(`{"model":${"[".repeat(n)}${"]".repeat(n)}}`)),
  },
  {
    weight: 1,
    arbitrary: fc.tuple(fc.integer({ min: MAX_BODY - 1024, max: MAX_BODY + 1024 }), fc.constantFrom("model", "messages")).map(([n, field]) => json({ model: "tiny", [field]: "x".repeat(n) })),
  },
  { weight: 1, arbitrary: fc.constantFrom(encoder.encode("\uFEFF{\"model\":\"a\"}"), new Uint8Array([0xff, 0xfe, 0x7b, 0x7d]), encoder.encode("null"), encoder.encode("{\"model\":\"a\"")) },
);

/** Now and then as if a mesh member forwarded it (the marker is kept only then). */
const forwarded = fc.oneof({ weight: 5, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) });
const anyRequest = fc.record({ method, path, headers, body, forwarded });
/** A POST to an inference or management route as a client sends it, its body and other headers fuzzed. */
const aimedRequest = fc
  .record({
    method: fc.constant("POST"),
    path: fc.constantFrom("/api/v1/load", "/api/v1/unload", ...Object.keys(INFERENCE_ROUTES).map((r) => `/v1${r}`)),
    headers: headers.map((h) => ({ ...h, host: "127.0.0.1:9337", origin: undefined, "content-type": "application/json" })),
    body,
    forwarded,
  });
const request = fc.oneof(anyRequest, aimedRequest);
type FuzzRequest = typeof request extends fc.Arbitrary<infer T> ? T : never;

/** The fetch Request for a generated one; header values `Headers` refuses are left out. */
function toRequest(r: FuzzRequest): Request {
  const h = new Headers();
  const { extra, ...named } = r.headers;
  for (const [name, value] of [...Object.entries(named), ...extra]) {
    if (value === undefined) continue;
    try {
      h.append(name, value);
    } catch {
      // not a value a client could send
    }
  }
  if (r.forwarded) h.set(FORWARDED_HEADER, "1");
  const bodyAllowed = r.body !== undefined && !["GET", "HEAD"].includes(r.method.toUpperCase());
  return new Request(`http://127.0.0.1:9337${r.path}`, { method: r.method, headers: h, ...(bodyAllowed ? { body: r.body } : {}) });
}

async function expectCleanAnswer(res: Response, req: Request): Promise<void> {
  const status = res.status;
  const text = await withDeadline(res.text(), HANG_MS, `the body of ${req.method} ${req.url}`);
  const what = `${req.method} ${new URL(req.url).pathname} -> ${status} ${text.slice(0, 300)}`;
  expect({ what, ok: status < 500 || status === 503 || status === 501 }).toEqual({ what, ok: true });
  if (status >= 300 && status < 400) {
    expect({ what, location: res.headers.get("location") !== null }).toEqual({ what, location: true });
    return;
  }
  if (status < 400 || req.method.toUpperCase() === "HEAD") return;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new Error(`not JSON: ${what}`);
  }
  if (OLLAMA_PATHS.includes(new URL(req.url).pathname)) {
    const ollama = (parsed as { error?: unknown }).error;
    expect({ what, ollama: typeof ollama === "string" && ollama.trim() !== "" }).toEqual({ what, ollama: true });
    return;
  }
  if (isAnthropicPath(new URL(req.url).pathname)) {
    // Anthropic's shape: its SDKs read `error.type` and `error.message` under `type: "error"`.
    const anthropic = parsed as { type?: unknown; error?: { message?: unknown; type?: unknown } };
    const ok = anthropic.type === "error" && typeof anthropic.error?.type === "string" && typeof anthropic.error.message === "string" && anthropic.error.message.trim() !== "";
    expect({ what, anthropic: ok }).toEqual({ what, anthropic: true });
    return;
  }
  const error = (parsed as { error?: { message?: unknown; type?: unknown; code?: unknown } }).error;
  expect({ what, message: typeof error?.message === "string" && error.message.trim() !== "" }).toEqual({ what, message: true });
  expect({ what, type: typeof error?.type === "string" && error.type !== "" }).toEqual({ what, type: true });
  expect({ what, code: error !== undefined && "code" in error && (error.code === null || typeof error.code === "string") }).toEqual({ what, code: true });
}

/**
 * What a browser page can never get from outside the mesh (forwarded requests come from no page):
 * an answer through a foreign `Host` (DNS rebinding), or a state change from a foreign `Origin`.
 */
function expectBrowsersKeptOut(r: FuzzRequest, req: Request, res: Response): void {
  if (r.forwarded) return;
  const what = `${req.method} ${r.path} Host=${JSON.stringify(r.headers.host)} Origin=${JSON.stringify(r.headers.origin)} -> ${res.status}`;
  const host = req.headers.get("host");
  if (host === null || FOREIGN_HOSTS.includes(host)) expect({ what, refused: res.status >= 400 }).toEqual({ what, refused: true });
  const origin = req.headers.get("origin");
  // The method the app sees: Bun's Request makes "Post" a GET (Bun.serve refuses such a request line).
  const method = req.method.toUpperCase();
  if (!["GET", "HEAD"].includes(method) && origin !== null && FOREIGN_ORIGINS.includes(origin)) {
    expect({ what, refused: res.status >= 400 }).toEqual({ what, refused: true });
  }
}

describe("the HTTP API, fuzzed in-process", () => {
  const open = node([]);
  const keyed = node([KEY]);

  test("without API keys: every request answered in time, cleanly, nothing loaded", async () => {
    await holdsAsync(
      fc.asyncProperty(request, async (r) => {
        const req = toRequest(r);
        const res = await withDeadline(open.fetch(req, r.forwarded), HANG_MS, `${r.method} ${r.path}`);
        expectBrowsersKeptOut(r, req, res);
        await expectCleanAnswer(res, req);
        expect(open.asked.loads).toBe(0);
        expect(open.pool.loaded()).toEqual([]);
      }),
      { runs: RUNS, hangMs: HANG_MS * 2 },
    );
  });

  test("with an API key: the same, and nothing under /v1 or /api succeeds without the key", async () => {
    await holdsAsync(
      fc.asyncProperty(request, async (r) => {
        const req = toRequest(r);
        const presented = presentedKey(req.headers);
        const res = await withDeadline(keyed.fetch(req, r.forwarded), HANG_MS, `${r.method} ${r.path}`);
        const pathname = new URL(req.url).pathname;
        const guarded = /^\/(v1|api)(\/|$)/.test(pathname);
        // A CORS preflight is answered before any key (it says what a page may send, nothing more).
        if (guarded && !r.forwarded && presented !== KEY && req.method.toUpperCase() !== "OPTIONS") {
          expect({ pathname, status: res.status >= 400 }).toEqual({ pathname, status: true });
        }
        expectBrowsersKeptOut(r, req, res);
        await expectCleanAnswer(res, req);
        expect(keyed.asked.loads).toBe(0);
        expect(keyed.pool.loaded()).toEqual([]);
      }),
      { runs: RUNS, hangMs: HANG_MS * 2 },
    );
  });
});
