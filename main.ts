#!/usr/bin/env bun
/**
 * The `mesh` executable: parses the command line and runs the command. The node itself is composed
 * here (model store, pool, router), since nothing else may import the router.
 */
import pkg from "./package.json" with { type: "json" };
import { CommandError, localUrl } from "./commands/common.ts";
import { buildLlamaCommand, showLlama } from "./commands/llama.ts";
import { installService, uninstallService } from "./commands/service.ts";
import { showStatus } from "./commands/status.ts";
import { showModels } from "./commands/models.ts";
import { pullCommand } from "./commands/pull.ts";
import { removeModel } from "./commands/rm.ts";
import { showToken } from "./commands/token.ts";
import { rosterCommand } from "./commands/roster.ts";
import { guestsCommand } from "./commands/guests.ts";
import type { Config } from "./config/config.ts";
import { helpText } from "./config/help.ts";
import { parseCli, UsageError, type Command } from "./config/parse-cli.ts";
import { availableBackends, listDevices } from "./llama/devices.ts";
import { describeExpectedLlama } from "./llama/pin.ts";
import { describeBuild, provideLlama } from "./llama/resolve.ts";
import { openConsole } from "./commands/open.ts";
import { createLog } from "./base/log.ts";
import { LogRing } from "./base/log-ring.ts";
import { consoleSource } from "./node/console-source.ts";
import { describeTransport } from "./mesh/transport.ts";
import { createNode, type NodeParts } from "./node/node.ts";
import { NodeSetupError } from "./node/model-arg.ts";
import { concreteHost, LocalProofKey } from "./node/local-proof.ts";
import { createApp, viaListener } from "./router/app.ts";
import { ServingCore } from "./router/serving/serving.ts";
import { crashed, frontDoor, keepAliveMsFor } from "./router/front-door.ts";
import { readConfigFile } from "./config/config-file.ts";
import { envName, settingsReport } from "./config/layers.ts";
import { NODE_FLAGS } from "./config/flags.ts";

const isLoopback = (host: string) => host === "localhost" || host === "::1" || /^127\./.test(host);

async function startNode(config: Config): Promise<void> {
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
    node = await createNode(config, llama, devices, log);
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
    metrics: { pool: node.pool, peers: () => node.mesh()?.membership.peers.size ?? 0, tunnels: () => node.tunnels.counters, kv: () => ({ follow: node.kv.follow?.counters, holder: node.kv.holder.counters }) },
    browser: { listen: config.listen, corsOrigins: config.corsOrigins },
    keepAliveMs: keepAliveMsFor(config.idleTimeoutS),
    console: consoleSource({ version: pkg.version, mesh: node.mesh, view: node.view, pool: node.pool, tunnels: node.tunnels, logs, log }),
    localProof: (challenge, dialed) => proofKey?.prove(challenge, dialed),
  });
  node.setHttpHandler(async (req) => app.fetch(req));
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
  node.start(apiPort);
}

async function run(cmd: Command): Promise<void> {
  switch (cmd.kind) {
    case "help":
      return void process.stdout.write(helpText());
    case "version":
      return void console.log(`mesh ${pkg.version}\n${describeExpectedLlama()}\n${await describeTransport()}`);
    case "node":
      return startNode(cmd.config);
    case "status":
      return showStatus(cmd.config, cmd.json);
    case "token":
      return showToken(cmd.config, cmd.guest);
    case "roster":
      return rosterCommand(cmd.config, cmd.action, cmd.token);
    case "guests":
      return guestsCommand(cmd.config, cmd.revoke, cmd.json);
    case "open":
      return openConsole(cmd.config, cmd.print);
    case "pull":
      return pullCommand(cmd.config, cmd.ref, cmd.name);
    case "models":
      return showModels(cmd.config, cmd.json);
    case "rm":
      return removeModel(cmd.config, cmd.name);
    case "llama":
      return cmd.action === "build" ? buildLlamaCommand(cmd.config, cmd.source, createLog(cmd.config.logFormat)) : showLlama(cmd.config);
    case "service":
      return cmd.action === "install" ? installService(cmd) : uninstallService(cmd);
  }
}

try {
  await run(parseCli(process.argv.slice(2), undefined, { env: process.env, readConfigFile }));
} catch (err) {
  if (err instanceof UsageError) {
    console.error(`mesh: ${err.message}\nRun \`mesh --help\` for usage.`);
    process.exit(2);
  }
  console.error(`mesh: ${err instanceof CommandError ? err.message : err instanceof Error ? err.stack : String(err)}`);
  process.exit(1);
}
