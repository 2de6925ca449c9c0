/** `mesh llama`: which llama.cpp binaries the node would run, and what they can use. */
import type { Config } from "../config/config.ts";
import { availableBackends, listDevices } from "../llama/devices.ts";
import { describeExpectedLlama } from "../llama/pin.ts";
import { llamaServerVersion, resolveLlamaBinaries } from "../llama/resolve.ts";
import { CommandError } from "./common.ts";

export async function showLlama(config: Config): Promise<void> {
  let bin;
  try {
    bin = resolveLlamaBinaries(config.llamaDir);
  } catch (err) {
    throw new CommandError((err as Error).message);
  }
  console.log(`expected:     ${describeExpectedLlama()}`);
  console.log(`llama-server: ${bin.llamaServer} (${await llamaServerVersion(bin)})`);
  console.log(`rpc-server:   ${bin.rpcServer}`);
  console.log(`backends:     ${availableBackends(await listDevices(bin)).join(", ")}`);
}
