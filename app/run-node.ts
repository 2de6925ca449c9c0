/**
 * The composition root: a node built from its parts and served. The llama.cpp binaries and the
 * devices they see, the node (`node/node.ts`: store, pool, mesh, tunnels, its part in the mesh's
 * models), the serving core over it, the HTTP app over that, and the listeners; then the mesh
 * starts, with the app as what answers the requests members forward. `main.ts` parses the flags
 * and calls this.
 */
import pkg from "../package.json" with { type: "json" };
import { CommandError, localUrl } from "../commands/common.ts";
import type { Config } from "../config/config.ts";
import { availableBackends, listDevices } from "../llama/devices.ts";
import { describeBuild, provideLlama } from "../llama/resolve.ts";
import { createLog } from "../base/log.ts";
import { LogRing } from "../base/log-ring.ts";
import { consoleSource } from "../node/console-source.ts";
import { createNode, type NodeParts } from "../node/node.ts";
import { meshIdentity } from "../node/mesh-node.ts";
import { NodeSetupError } from "../node/model-arg.ts";
import { concreteHost, LocalProofKey } from "../node/local-proof.ts";
import { createApp, viaListener } from "../router/app.ts";
import { ServingCore } from "../router/serving/serving.ts";
import { crashed, frontDoor, keepAliveMsFor } from "../router/front-door.ts";
import { envName, settingsReport } from "../config/layers.ts";
import { NODE_FLAGS } from "../config/flags.ts";

const isLoopback = (host: string) => host === "localhost" || host === "::1" || /^127\./.test(host);

export async function runNode(config: Config): Promise<void> {
  const logs = new LogRing();
  const log = createLog(config.logFormat, undefined, (level, msg, fields) => logs.add(level, msg, fields));
  // Read into the config already: children (llama-server, rpc-server) inherit the environment, and
  // the mesh secret or an API key has no business there.
  for (const f of NODE_FLAGS) if (f.secret) delete process.env[envName(f.name)];
  // llama-server takes LLAMA_API_KEY as one more key beside the node's own (pool/child-key.ts).
  delete process.env.LLAMA_API_KEY;
  if (!isLoopback(config.listen) && config.apiKeys.length === 0 && !config.insecure) {
    throw new CommandError(`refusing to serve the API on ${config.listen} without an --api-key: anyone who reaches it could use this node and its mesh; add --api-key KEY, or --insecure if something else guards it`);
  }
  const ollamaListen = config.ollamaListen;
  if (ollamaListen && !isLoopback(ollamaListen.host) && config.apiKeys.length === 0 && !config.insecure) {
    throw new CommandError(`refusing to serve the API on ${ollamaListen.host} (--ollama-listen) without an --api-key: anyone who reaches it could use this node and its mesh; add --api-key KEY, or --insecure if something else guards it`);
  }
  let llama;
  try {
    llama = await provideLlama(config, log);
    llama.build = await describeBuild(llama);
  } catch (err) {
    throw new CommandError((err as Error).message);
  }
  const devices = await listDevices(llama);
  let node: NodeParts;
  try {
    // Who this node is in its mesh (no network yet): a token against the flags, a roster that does not read, refuse the start.
    const identity = await meshIdentity(config, log).catch((err: unknown) => {
      throw new CommandError((err as Error).message);
    });
    node = await createNode(config, identity, llama, devices, log);
  } catch (err) {
    if (err instanceof NodeSetupError) throw new CommandError(err.message);
    throw err;
  }
  const serving = new ServingCore({
    store: node.store,
    pool: node.pool,
    version: pkg.version,
    mesh: {
      status: () => ({
        ...node.meshStatus(),
        models: node.group.status(),
        settings: settingsReport(config),
        tunnels: Object.fromEntries(node.tunnels.counters),
        zeroTransfer: node.zeroTransfer.stats,
      }),
    },
    routing: node.routing,
    affinity: config.affinity === "on",
    admin: node.admin,
    memory: () => node.view.views().map((v) => v.vramBytes),
    kvFollow: node.kv.follow,
  });
  // Made once the API listens: a start that fails to bind must not replace a running node's key.
  let proofKey: LocalProofKey | undefined;
  let apiPort = config.port;
  const app = createApp(serving, {
    maxBodyBytes: config.maxBodyBytes,
    backends: availableBackends(devices),
    devices,
    apiKeys: config.apiKeys,
    mediaHosts: config.mediaHosts,
    metrics: { pool: node.pool, peers: () => node.mesh()?.membership.peers.size ?? 0, tunnels: () => node.tunnels.counters, kv: () => ({ follow: node.kv.follow?.counters, holder: node.kv.holder.counters }) },
    browser: { listen: config.listen, corsOrigins: config.corsOrigins },
    keepAliveMs: keepAliveMsFor(config.idleTimeoutS),
    console: consoleSource({ version: pkg.version, mesh: node.mesh, view: node.view, pool: node.pool, tunnels: node.tunnels, logs, log }),
    localProof: (challenge, dialed) => proofKey?.prove(challenge, dialed),
  });
  let server: ReturnType<typeof Bun.serve>;
  // The same app where Ollama's tools look (127.0.0.1:11434), held to that listener's host; one cap for both.
  let ollamaServer: ReturnType<typeof Bun.serve> | undefined;
  try {
    // The body limit is the app's (so a 413 comes in OpenAI's shape); Bun's own would answer first.
    server = Bun.serve({
      hostname: config.listen,
      port: config.port,
      fetch: frontDoor(app, { maxConnections: config.maxConnections, idleTimeoutS: config.idleTimeoutS, elsewhere: () => ollamaServer?.pendingRequests ?? 0 }),
      error: crashed,
      idleTimeout: config.idleTimeoutS,
      maxRequestBodySize: Number.MAX_SAFE_INTEGER,
    });
  } catch (err) {
    await node.stop();
    const code = (err as { code?: string }).code;
    const why = code === "EADDRINUSE" ? "the port is in use (another mesh node? pick one with --port)" : (err as Error).message;
    throw new CommandError(`cannot listen on ${config.listen}:${config.port}: ${why}`);
  }
  apiPort = server.port ?? config.port;
  if (ollamaListen) {
    try {
      ollamaServer = Bun.serve({
        hostname: ollamaListen.host,
        port: ollamaListen.port,
        fetch: frontDoor(viaListener(app, ollamaListen.host), { maxConnections: config.maxConnections, idleTimeoutS: config.idleTimeoutS, elsewhere: () => server.pendingRequests }),
        error: crashed,
        idleTimeout: config.idleTimeoutS,
        maxRequestBodySize: Number.MAX_SAFE_INTEGER,
      });
    } catch (err) {
      await server.stop(true);
      await node.stop();
      const code = (err as { code?: string }).code;
      const why = code === "EADDRINUSE" ? "the port is in use (Ollama itself? stop it, or pick another port)" : (err as Error).message;
      throw new CommandError(`cannot listen on ${ollamaListen.host}:${ollamaListen.port} (--ollama-listen): ${why}`);
    }
  }

  proofKey = new LocalProofKey(config.stateDir, { host: await concreteHost(config.listen), port: apiPort });

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info("shutting down", { signal });
    node.beginShutdown();
    // Stop accepting; requests in flight get a short while to finish, then every child stops.
    await Promise.race([Promise.all([server.stop(), ollamaServer?.stop()]), Bun.sleep(10_000)]);
    proofKey?.remove();
    await node.stop();
    log.info("stopped");
    process.exit(0);
  };
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));

  log.info(`mesh API listening on ${localUrl({ listen: config.listen, port: apiPort })}`, {
    version: pkg.version,
    models: node.store.list().length,
    llama: llama.dir,
  });
  log.info(`console at ${localUrl({ listen: config.listen, port: apiPort })}/ (\`mesh open\`)`);
  // After the line above: tools (and tests) read the first "listening on" as the main API.
  if (ollamaServer) log.info(`ollama API listening on ${localUrl({ listen: ollamaListen!.host, port: ollamaServer.port ?? ollamaListen!.port })}`);
  // Members' forwarded requests reach the same app (with no listener's bindings: not from a socket).
  node.start(apiPort, async (req) => app.fetch(req));
}
