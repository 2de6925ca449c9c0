#!/usr/bin/env bun
/**
 * The `mesh` executable: parses the command line and runs the command. The node itself is composed
 * here (model store, pool, router), since nothing else may import the router.
 */
import { existsSync, mkdirSync } from "node:fs";
import { totalmem } from "node:os";
import { resolve } from "node:path";
import pkg from "./package.json" with { type: "json" };
import { CommandError, localUrl } from "./commands/common.ts";
import { showLlama } from "./commands/llama.ts";
import { showStatus } from "./commands/status.ts";
import type { Config } from "./config/config.ts";
import { helpText } from "./config/help.ts";
import { parseCli, UsageError, type Command } from "./config/parse-cli.ts";
import { availableBackends, listDevices } from "./llama/devices.ts";
import { describeExpectedLlama, LLAMA_SOURCE } from "./llama/pin.ts";
import { resolveLlamaBinaries } from "./llama/resolve.ts";
import { createLog } from "./log.ts";
import { startMesh, type MeshNode } from "./mesh/mesh-node.ts";
import { describeTransport } from "./mesh/transport.ts";
import { ModelStore } from "./models/model-store.ts";
import { Pool } from "./pool/pool.ts";
import { createApp } from "./router/app.ts";
import type { Serving } from "./router/serving.ts";

/** `--model` values that name files (rather than models in the models dir). */
const isPath = (v: string) => v.includes("/") || /\.gguf$/i.test(v);

async function startNode(config: Config): Promise<void> {
  const log = createLog(config.logFormat);
  mkdirSync(config.stateDir, { recursive: true, mode: 0o700 });
  let llama;
  try {
    llama = resolveLlamaBinaries(config.llamaDir);
  } catch (err) {
    throw new CommandError((err as Error).message);
  }
  const missing = config.models.filter((m) => isPath(m) && !existsSync(m));
  if (missing.length) throw new CommandError(`--model ${missing.join(", ")}: no such file`);
  const devices = await listDevices(llama);
  const store = new ModelStore({ modelsDir: config.modelsDir, extraFiles: config.models.filter(isPath), hasGpu: devices.length > 0 });
  const known = await store.refresh();
  const unknown = config.models.filter((m) => !isPath(m) && !known.some((k) => k.name === m));
  if (unknown.length) {
    throw new CommandError(`--model ${unknown.join(", ")}: not in ${config.modelsDir} (known: ${known.map((k) => k.name).join(", ") || "none"})`);
  }

  let mesh: MeshNode | undefined;
  const pool = new Pool({
    llama,
    stateDir: config.stateDir,
    maxLoadedModels: config.maxLoadedModels,
    idleUnloadMs: config.idleUnloadMs,
    loadTimeoutMs: config.loadTimeoutMs,
    defaultCtxSize: config.ctxSize,
    defaultArgs: config.llamacppArgs,
    log,
    onChange: () => mesh?.announceIfChanged(),
  });
  const serving: Serving = {
    store,
    pool,
    version: pkg.version,
    lastStats: undefined,
    mesh: { status: () => mesh?.status() ?? { state: "starting", nodeId: null, token: null, peers: [] } },
  };
  const app = createApp(serving, { maxBodyBytes: config.maxBodyBytes, backends: availableBackends(devices) });
  let server: ReturnType<typeof Bun.serve>;
  try {
    // The body limit is the app's (so a 413 comes in OpenAI's shape); Bun's own would answer first.
    server = Bun.serve({ hostname: config.listen, port: config.port, fetch: app.fetch, idleTimeout: 0, maxRequestBodySize: Number.MAX_SAFE_INTEGER });
  } catch (err) {
    await pool.close();
    const code = (err as { code?: string }).code;
    const why = code === "EADDRINUSE" ? "the port is in use (another mesh node? pick one with --port)" : (err as Error).message;
    throw new CommandError(`cannot listen on ${config.listen}:${config.port}: ${why}`);
  }
  const apiPort = server.port ?? config.port;

  // The iroh endpoint takes seconds to come up (it probes the network); the local API serves meanwhile.
  const vramBytes = config.vramBytes ?? devices.reduce((sum, d) => sum + d.totalBytes, 0);
  void startMesh(
    config,
    (nodeId, addresses, relayUrl) => ({
      nodeId,
      addresses,
      ...(relayUrl ? { relayUrl } : {}),
      role: pool.loaded().length ? "host" : "idle",
      vramBytes,
      ramBytes: totalmem(),
      modelsOnDisk: store.list().map((m) => ({ name: m.name, size: m.sizeBytes })),
      serving: pool.loaded().filter((s) => s.state === "ready").map((s) => s.model),
      apiPort,
      lastRequest: Object.fromEntries(pool.loaded().map((s) => [s.model, s.lastUse])),
      meshVersion: pkg.version,
      llamaBuild: LLAMA_SOURCE.commit,
      rpcProtocol: LLAMA_SOURCE.rpcProtocol,
    }),
    log,
  ).then(
    (m) => {
      mesh = m;
      log.info(`Join token: ${m.token}`, { node: m.nodeId, mesh: m.founded ? "founded" : "joined" });
      return m;
    },
    async (err: unknown) => {
      log.error("the mesh endpoint failed to start", { error: (err as Error).message });
      await pool.close();
      process.exit(1);
    },
  );

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info("shutting down", { signal });
    // A mesh endpoint still starting has no peers to tell; exiting ends it.
    if (mesh) await Promise.race([mesh.stop(), Bun.sleep(5_000)]);
    // Stop accepting; requests in flight get a short while to finish, then every child stops.
    await Promise.race([server.stop(), Bun.sleep(10_000)]);
    await pool.close();
    log.info("stopped");
    process.exit(0);
  };
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));

  log.info(`mesh API listening on ${localUrl({ listen: config.listen, port: apiPort })}`, {
    version: pkg.version,
    models: known.length,
    llama: llama.dir,
  });
  for (const name of config.models) {
    const model = known.find((k) => (isPath(name) ? k.path === resolve(name) : k.name === name));
    if (!model) continue;
    await pool.load(model).catch((err) => log.error("could not load --model", { model: model.name, error: (err as Error).message.split("\n")[0] }));
  }
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
    case "llama":
      return showLlama(cmd.config);
    case "service":
      throw new CommandError("systemd units are not in this build of mesh yet; run `mesh` under a unit of your own for now");
  }
}

try {
  await run(parseCli(process.argv.slice(2)));
} catch (err) {
  if (err instanceof UsageError) {
    console.error(`mesh: ${err.message}\nRun \`mesh --help\` for usage.`);
    process.exit(2);
  }
  console.error(`mesh: ${err instanceof CommandError ? err.message : err instanceof Error ? err.stack : String(err)}`);
  process.exit(1);
}
