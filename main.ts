#!/usr/bin/env bun
/**
 * The `mesh` executable: parses the command line and runs the command; a node is composed and
 * served by `app/run-node.ts`.
 */
import pkg from "./package.json" with { type: "json" };
import { CommandError } from "./commands/common.ts";
import { buildLlamaCommand, showLlama } from "./commands/llama.ts";
import { installService, uninstallService } from "./commands/service.ts";
import { showStatus } from "./commands/status.ts";
import { showModels } from "./commands/models.ts";
import { pullCommand } from "./commands/pull.ts";
import { removeModel } from "./commands/rm.ts";
import { showToken } from "./commands/token.ts";
import { rosterCommand } from "./commands/roster.ts";
import { guestsCommand } from "./commands/guests.ts";
import { helpText } from "./config/help.ts";
import { parseCli, UsageError, type Command } from "./config/parse-cli.ts";
import { describeExpectedLlama } from "./llama/pin.ts";
import { openConsole } from "./commands/open.ts";
import { createLog } from "./base/log.ts";
import { describeTransport } from "./mesh/transport.ts";
import { readConfigFile } from "./config/config-file.ts";
import { runNode } from "./app/run-node.ts";

async function run(cmd: Command): Promise<void> {
  switch (cmd.kind) {
    case "help":
      return void process.stdout.write(helpText());
    case "version":
      return void console.log(`mesh ${pkg.version}\n${describeExpectedLlama()}\n${await describeTransport()}`);
    case "node":
      return runNode(cmd.config);
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
