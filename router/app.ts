/**
 * The node's HTTP API as one Hono app: `/health`, `/metrics`, the console at `/`, the
 * OpenAI-compatible `/v1`, the management `/api/v1`. Cross-cutting rules live here once: request metrics, the browser guard,
 * API keys, body size limit, error shape, unknown routes.
 */
import { Hono, type MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import type { LlamaDevice } from "../llama/devices.ts";
import { NodeMetrics, type MetricSources } from "../metrics/node-metrics.ts";
import { requireApiKey } from "./http/api-keys.ts";
import { browserGuard, type BrowserPolicy } from "./http/browser-guard.ts";
import type { ConsoleSources } from "../node/console-source.ts";
import { ConsoleFeed } from "./console/console-feed.ts";
import { LOCAL_PROOF_PATH } from "../node/local-proof.ts";
import { consoleRoutes } from "./console/console.ts";
import { badRequest, errorResponse, respondToError } from "./http/errors.ts";
import { anthropicErrors } from "./dialects/anthropic-errors.ts";
import { KEEP_ALIVE_MS } from "./serving/proxy.ts";
import { managementRoutes } from "./dialects/management.ts";
import { requestMetrics, scrapeMetrics } from "./http/request-metrics.ts";
import { ollamaRoutes } from "./dialects/ollama.ts";
import { llamaRoutes, LLAMA_ROUTES, openAiInference, openAiRoutes } from "./dialects/openai.ts";
import { noRoute } from "./dialects/no-route.ts";
import { countedAsV1 } from "./dialects/openai-under-api.ts";
import { LEMONADE_BASES, OLLAMA_INFERENCE_PATHS } from "./http/route-table.ts";
import type { Serving } from "./serving/serving.ts";

export interface AppOptions {
  maxBodyBytes: number;
  /** `llamacpp_backend` values a load may ask for. */
  backends: readonly string[];
  /** The build's accelerators (`/api/v1/system-info`); none: a CPU-only build. */
  devices?: readonly LlamaDevice[];
  /** Hosts (names or IPs) a client's images by URL may come from whatever their addresses (`--media-hosts`); none: public addresses only. */
  mediaHosts?: readonly string[];
  /** Keys `/v1` and `/api` require; none: open. */
  apiKeys: readonly string[];
  /** What `/metrics` reads when scraped: the pool, and from the mesh its peers and tunnels. */
  metrics: MetricSources;
  /** Which `Host`s and web origins requests from outside may come with (default: loopback, no origins). */
  browser?: BrowserPolicy;
  /** Silence after which an SSE answer gets a keep-alive comment (`keepAliveMsFor` the idle timeout). */
  keepAliveMs?: number;
  /** What the console shows (a node's state, its log); without it the page is served and its state answers 503. */
  console?: ConsoleSources;
  /** This node's answer to the CLI's challenge for the address it dialed (`node/local-proof.ts`); undefined for a challenge it does not make, or an address it does not listen on. */
  localProof?: (challenge: string, dialed: string) => { proof: string; bound: string } | undefined;
}

/** What the front door tells the app about a request from a socket; forwarded requests have none. */
export interface ConnectionHooks {
  /** The request has been read whole (body included): the handler's work is not idleness. */
  bodyRead(): void;
}

/** What the listener a request came in on tells the app (a member's forwarded request comes with none). */
export type AppEnv = {
  Bindings: {
    connection?: ConnectionHooks;
    /** The host of the listener the request came in on, when not `--listen` (`--ollama-listen`'s). */
    listen?: string;
  };
};

/**
 * The app as a second listener on `listen` serves it (`--ollama-listen`): the same routes, keys
 * and metrics, with the browser guard held to that listener's host.
 */
export function viaListener(app: Hono<AppEnv>, listen: string): Hono<AppEnv> {
  const door = new Hono<AppEnv>();
  door.all("*", (c) => app.fetch(c.req.raw, { ...c.env, listen }));
  return door;
}

/** Reads the body whole (the limit already held it), then says so to the front door. */
const readBody: MiddlewareHandler<AppEnv> = async (c, next) => {
  if (c.req.raw.body) await c.req.arrayBuffer();
  // Forwarded requests come with no bindings at all.
  c.env?.connection?.bodyRead();
  await next();
};

export function createApp(serving: Serving, opts: AppOptions): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  const metrics = new NodeMetrics(opts.metrics);
  const { count, countAs, observer } = requestMetrics(metrics);
  // Outermost: every error on Anthropic's routes, whoever refused, reaches its SDK in its shape.
  app.use("*", anthropicErrors);
  // First, so requests the guard, the API keys or the body limit refuse are counted too.
  app.use("/v1/*", count);
  for (const path of [...Object.keys(LLAMA_ROUTES), ...OLLAMA_INFERENCE_PATHS]) app.use(path, count);
  for (const base of LEMONADE_BASES) app.use(`${base}/*`, countedAsV1(countAs, base));
  const browser = opts.browser ?? { listen: "127.0.0.1", corsOrigins: [] };
  // One guard per listener (the host each is held to); the listen values come from the node's own code.
  const guards = new Map<string, MiddlewareHandler>([[browser.listen, browserGuard(browser)]]);
  const guardFor = (listen: string) => guards.get(listen) ?? guards.set(listen, browserGuard({ ...browser, listen })).get(listen)!;
  app.use("*", (c, next) => guardFor(c.env?.listen ?? browser.listen)(c, next));
  app.get("/health", (c) => c.json({ status: "ok" }));
  // Lemonade's liveness probe: no work beyond answering.
  app.get("/live", (c) => c.json({ status: "ok" }));
  // Open like /health: scrapers carry no API key; it tells counts and timings, never content.
  app.get("/metrics", scrapeMetrics(metrics));
  // Before any key: the CLI sends its key only once this has shown the node is its own.
  app.get(LOCAL_PROOF_PATH, (c) => {
    const proof = opts.localProof?.(c.req.query("challenge") ?? "", c.req.query("dialed") ?? "");
    return proof ? c.json(proof) : badRequest(c, "challenge must be 64 hex digits, for the address this node listens on (dialed=HOST:PORT)", "invalid_challenge");
  });
  const limit = bodyLimit({
    maxSize: opts.maxBodyBytes,
    onError: (c) => errorResponse(c, 413, `request body is larger than the limit of ${opts.maxBodyBytes} bytes (--max-body-size)`, "invalid_request_error", "body_too_large"),
  });
  // The key before any byte of the body is read: a caller without one costs the node nothing (the
  // limit buffers chunked bodies whole). Other paths read no body at all: they answer 404.
  for (const path of ["/v1/*", "/api/*", "/v0/*", ...Object.keys(LLAMA_ROUTES)]) {
    app.use(path, requireApiKey(opts.apiKeys));
    app.use(path, limit);
    app.use(path, readBody);
  }
  app.get("/api/status", (c) => c.json({ version: serving.version, ...serving.status() }));
  // Ollama's own root answers this, and its tools probe for it where they look for Ollama (`--ollama-listen`).
  app.get("/", (c, next) => (c.env?.listen !== undefined ? c.text("Ollama is running") : next()));
  const feed = opts.console ? new ConsoleFeed(opts.console, metrics) : undefined;
  app.route("/", consoleRoutes(feed, opts.keepAliveMs ?? KEEP_ALIVE_MS));
  // Every dialect's inference goes this one way into serving, counted under the route it came by.
  const infer = openAiInference(serving, observer, opts.keepAliveMs, { allowHosts: opts.mediaHosts ?? [], maxBodyBytes: opts.maxBodyBytes });
  app.route("/v1", openAiRoutes(serving, infer));
  // llama-server's own model routes (`/tokenize`...) at the root, where its clients call them.
  app.route("/", llamaRoutes(infer));
  // Ollama's routes are `/api/<name>`, beside `/api/v1` and `/api/status`.
  app.route("/api", ollamaRoutes(serving, infer, opts.keepAliveMs));
  // Lemonade's base URLs (each alike) serve the OpenAI routes too; what is not one of them is management.
  const underApi = openAiRoutes(serving, infer, { fallThrough: true });
  const management = managementRoutes(serving, { backends: opts.backends, devices: opts.devices ?? [], keepAliveMs: opts.keepAliveMs });
  for (const base of LEMONADE_BASES) {
    app.route(base, underApi);
    app.route(base, management);
  }
  // A known path with the wrong method: 405 with `Allow`; an unknown path: 404.
  app.notFound(noRoute);
  app.onError((err, c) => respondToError(c, err));
  return app;
}
