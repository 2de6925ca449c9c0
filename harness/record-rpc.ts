#!/usr/bin/env bun
/**
 * Records the client-to-server bytes of a real llama.cpp RPC session (llama-server loading a test
 * model onto one rpc-server and answering one completion), for the parser's unit tests.
 *
 *   bun harness/record-rpc.ts --out tests/fixtures/rpc-tiny-session.bin
 */
import { createConnection, createServer } from "node:net";
import { parseArgs } from "node:util";
import { freePort } from "../pool/free-port.ts";
import { killAllChildren, spawnChild } from "./children.ts";
import { testModel } from "./models.ts";
import { waitFor } from "./wait.ts";
import { provideDevLlama } from "../scripts/llama-dev.ts";

const { values } = parseArgs({ options: { out: { type: "string", default: "tests/fixtures/rpc-tiny-session.bin" } } });
const llama = await provideDevLlama();
const rpcPort = freePort();
spawnChild("rpc-server", [llama.rpcServer, "-H", "127.0.0.1", "-p", String(rpcPort), "-t", "1"]);
const recorded: Buffer[] = [];
// Only the long-lived connection carries the load and the inference; the short probes come first.
const tap = createServer((client) => {
  const server = createConnection({ host: "127.0.0.1", port: rpcPort });
  client.on("data", (d) => {
    recorded.push(Buffer.from(d));
    server.write(d);
  });
  server.on("data", (d) => client.write(d));
  client.on("end", () => server.end());
  server.on("end", () => client.end());
  client.on("error", () => server.destroy());
  server.on("error", () => client.destroy());
});
const tapPort = await new Promise<number>((r) => tap.listen(0, "127.0.0.1", () => r((tap.address() as { port: number }).port)));
try {
  await waitFor(() => new Promise<boolean>((r) => createConnection({ host: "127.0.0.1", port: rpcPort }).once("connect", function (this: { destroy(): void }) { this.destroy(); r(true); }).once("error", () => r(false))), { what: "rpc-server" });
  const port = freePort();
  const server = spawnChild("llama-server", [llama.llamaServer, "-m", await testModel("tiny", "q8_0"), "--host", "127.0.0.1", "--port", String(port), "--rpc", `127.0.0.1:${tapPort}`, "-ngl", "99", "-t", "1", "-c", "256"], { env: { GGML_NO_BACKTRACE: "1" } });
  await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/health`)).status === 200, { what: "llama-server", timeoutMs: 60_000 });
  await fetch(`http://127.0.0.1:${port}/v1/completions`, { method: "POST", body: JSON.stringify({ prompt: "hello", max_tokens: 4 }) });
  await server.stop();
  await Bun.write(values.out!, Buffer.concat(recorded));
  console.log(`${values.out}: ${Buffer.concat(recorded).length} bytes`);
} finally {
  tap.close();
  await killAllChildren();
}
process.exit(0);
