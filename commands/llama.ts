/** `mesh llama`: which llama.cpp binaries the node would run and what they can use; `mesh llama build` makes them. */
import type { Config } from "../config/config.ts";
import type { Log } from "../base/log.ts";
import { llamaCacheRoot } from "../llama/binaries.ts";
import { buildLlama } from "../llama/build.ts";
import { availableBackends, listDevices } from "../llama/devices.ts";
import { buildFlavor } from "../llama/flavor.ts";
import { describeExpectedLlama } from "../llama/pin.ts";
import { probeMachine } from "../llama/probe.ts";
import { findLlama, llamaServerVersion } from "../llama/resolve.ts";
import { CommandError } from "./common.ts";

export async function showLlama(config: Config): Promise<void> {
  let bin;
  try {
    bin = findLlama(config);
  } catch (err) {
    throw new CommandError((err as Error).message);
  }
  console.log(`expected:     ${describeExpectedLlama()}, release ${config.llamaRelease}`);
  if (!bin) {
    console.log(`installed:    none yet (the node downloads it on first start; or \`mesh llama build\`)`);
    return;
  }
  console.log(`llama-server: ${bin.llamaServer} (${await llamaServerVersion(bin)})`);
  console.log(`rpc-server:   ${bin.rpcServer}`);
  console.log(`backends:     ${availableBackends(await listDevices(bin)).join(", ")}`);
}

export async function buildLlamaCommand(config: Config, source: string | undefined, log: Log): Promise<void> {
  const flavor = config.llamaFlavor ?? buildFlavor(probeMachine());
  try {
    const bin = await buildLlama({ cacheRoot: llamaCacheRoot(), tag: config.llamaRelease, flavor, source, apiBase: config.llamaMirror, log, replace: true });
    console.log(bin.dir);
  } catch (err) {
    throw new CommandError(`building llama.cpp failed: ${(err as Error).message}`);
  }
}
