/**
 * A QUIC port another process takes between the moment a node picks (or remembers) it and iroh's
 * bind: with ports that are a preference the endpoint binds a free one and says where it is; with
 * the operator's own port it fails, saying why. A real iroh 1.x endpoint on loopback, relays off,
 * the port held by a UDP socket of the test's.
 */
import { afterEach, expect, test } from "bun:test";
import { randomBytes } from "node:crypto";
import { createSocket, type Socket } from "node:dgram";
import { createLog } from "../../base/log.ts";
import { portTaken } from "../../mesh/transport-kit.ts";
import { Transport } from "../../mesh/transport.ts";

const held: Socket[] = [];
const started: Transport[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((t) => t.close()));
  for (const s of held.splice(0)) s.close();
});

async function holdPort(): Promise<number> {
  const socket = createSocket("udp4");
  held.push(socket);
  await new Promise<void>((resolve) => socket.bind(0, "127.0.0.1", resolve));
  return socket.address().port;
}

async function start(port: number, portsPreferred: boolean) {
  const lines: string[] = [];
  const t = await Transport.start({ secretKey: Uint8Array.from(randomBytes(32)), ipv4Addr: `127.0.0.1:${port}`, relay: "disabled", line: "iroh1", portsPreferred, log: createLog("json", (l) => void lines.push(l)), onConnection: () => {} });
  started.push(t);
  return { t, lines };
}

test("a preferred port taken before the bind: the endpoint binds a free one and its address says so", async () => {
  const port = await holdPort();
  const { t, lines } = await start(port, true);
  await t.ready;
  const ports = t.addr().addresses.filter((a) => a.startsWith("127.0.0.1:")).map((a) => Number(a.split(":")[1]));
  expect(ports.length).toBeGreaterThan(0);
  expect(ports).not.toContain(port);
  expect(lines.some((l) => l.includes("a QUIC port was taken before the endpoint bound it"))).toBe(true);
});

test("the operator's own port taken: the endpoint does not start, and says why", async () => {
  const port = await holdPort();
  const { t } = await start(port, false);
  const failed = await t.ready.then(() => "", (err: Error) => err.message);
  expect(portTaken(failed)).toBe(true);
  expect(failed).toContain(`127.0.0.1:${port}`);
});
