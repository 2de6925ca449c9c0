#!/usr/bin/env bun
/**
 * The `mesh` executable: parses the command line and runs the command. The node itself is composed
 * here (router + the rest), since nothing else may import the router.
 */
import { mkdirSync } from "node:fs";
import pkg from "./package.json" with { type: "json" };
import type { Config } from "./config/config.ts";
import { helpText } from "./config/help.ts";
import { parseCli, UsageError, type Command } from "./config/parse-cli.ts";
import { llamaServerVersion, resolveLlamaBinaries } from "./llama/resolve.ts";
import { describeExpectedLlama } from "./llama/pin.ts";
import { createLog } from "./log.ts";
import { describeTransport } from "./mesh/transport.ts";
import { createApp } from "./router/app.ts";

/** Exit codes: 1 = the command failed, 2 = the command line was wrong. */
class CommandError extends Error {}

/** The URL a client on this machine uses to reach a node listening on `listen`. */
function localUrl(config: Config): string {
  const host = config.listen === "0.0.0.0" ? "127.0.0.1" : config.listen === "::" ? "::1" : config.listen;
  return `http://${host.includes(":") ? `[${host}]` : host}:${config.port}`;
}

async function startNode(config: Config): Promise<void> {
  const log = createLog(config.logFormat);
  mkdirSync(config.stateDir, { recursive: true, mode: 0o700 });
  const app = createApp();
  let server: ReturnType<typeof Bun.serve>;
  try {
    server = Bun.serve({ hostname: config.listen, port: config.port, fetch: app.fetch });
  } catch (err) {
    const code = (err as { code?: string }).code;
    const why = code === "EADDRINUSE" ? "the port is in use (another mesh node? pick one with --port)" : (err as Error).message;
    throw new CommandError(`cannot listen on ${config.listen}:${config.port}: ${why}`);
  }
  log.info(`mesh API listening on ${localUrl({ ...config, port: server.port ?? config.port })}`, { version: pkg.version });

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info("shutting down", { signal });
    // Stop accepting; requests in flight get a short while to finish.
    await Promise.race([server.stop(), Bun.sleep(10_000)]);
    log.info("stopped");
    process.exit(0);
  };
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));
}

async function showStatus(config: Config, json: boolean): Promise<void> {
  const url = localUrl(config);
  let health: unknown;
  try {
    const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(5000) });
    health = await res.json();
  } catch {
    throw new CommandError(`no node answering at ${url} (start one with \`mesh\`, or point --listen/--port at it)`);
  }
  console.log(json ? JSON.stringify({ url, health }, null, 2) : `node at ${url}: ${JSON.stringify(health)}`);
}

async function showLlama(config: Config): Promise<void> {
  let bin;
  try {
    bin = resolveLlamaBinaries(config.llamaDir);
  } catch (err) {
    throw new CommandError((err as Error).message);
  }
  console.log(`expected:     ${describeExpectedLlama()}`);
  console.log(`llama-server: ${bin.llamaServer} (${await llamaServerVersion(bin)})`);
  console.log(`rpc-server:   ${bin.rpcServer}`);
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
  console.error(`mesh: ${err instanceof Error && err instanceof CommandError ? err.message : String(err instanceof Error ? err.stack : err)}`);
  process.exit(1);
}
