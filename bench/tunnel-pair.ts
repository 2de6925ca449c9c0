/**
 * One connection through our tunnel against plain TCP: a far end (bench/tunnel-far.ts, its own
 * process, on loopback or beside a lab node) and a near end in the bench process that turns each
 * local TCP connection into a QUIC stream to it, by the same pump the RPC tunnels use. Measures
 * throughput of one connection and 100-byte round trips; every wait has a deadline.
 */
import { randomBytes } from "node:crypto";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";
import type { MemberAddr } from "../mesh/join-token.ts";
import { Transport } from "../mesh/transport.ts";
import { quicToSocket, socketToQuic } from "../tunnel/pump.ts";
import type { Child } from "../harness/children.ts";
import { withDeadline } from "../harness/wait.ts";
import type { FarEnd } from "./tunnel-far.ts";

/** Longest any one measure may take before the bench gives up on it (a stuck pump must not hang CI). */
const MEASURE_DEADLINE_MS = 120_000;

export interface Endpoint {
  host: string;
  port: number;
}

function connect(to: Endpoint): Promise<Socket> {
  const s = createConnection({ host: to.host, port: to.port, noDelay: true });
  return withDeadline(
    new Promise((resolve, reject) => {
      s.once("connect", () => resolve(s));
      s.once("error", reject);
    }),
    10_000,
    `a TCP connection to ${to.host}:${to.port}`,
  );
}

/** Starts the far end with `spawn` (a process on loopback, or beside a lab node) and reads its line. */
export async function startFarEnd(spawn: (argv: string[]) => Child, host: string): Promise<{ far: FarEnd; child: Child }> {
  const child = spawn([process.execPath, join(import.meta.dir, "tunnel-far.ts"), "--bind", host]);
  const m = await child.waitForOutput(/^(\{.*"echoAddr".*\})$/m, 30_000);
  return { far: JSON.parse(m[1]!) as FarEnd, child };
}

/** A local port whose connections reach the far endpoint `to` as QUIC streams; bound on `host`. */
export async function tunnelTo(to: MemberAddr, host: string): Promise<{ port: number; close: () => Promise<void> }> {
  const near = await Transport.bind({ secretKey: randomBytes(32), ipv4Addr: `${host}:0`, ipv6Addr: "[::1]:0", relay: "disabled", onConnection: () => undefined });
  const conn = await withDeadline(near.dial(to), 30_000, "the tunnel's QUIC connection to the far end");
  const server: Server = createServer({ allowHalfOpen: true, noDelay: true }, async (socket) => {
    socket.on("error", () => socket.destroy());
    const stream = await conn.openStream();
    void Promise.all([socketToQuic(socket, stream.send, { bytes: 0 }), quicToSocket(stream.recv, socket, { bytes: 0 })]);
  });
  const port = await new Promise<number>((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as { port: number }).port)));
  return { port, close: async () => void (server.close(), await near.close()) };
}

/** MB/s of `mib` MiB sent over one connection to a sink that answers how many bytes it got. */
export async function throughput(to: Endpoint, mib: number): Promise<number> {
  const s = await connect(to);
  const chunk = new Uint8Array(1 << 20);
  const t = performance.now();
  const answer = new Promise<string>((resolve, reject) => {
    let text = "";
    s.on("data", (d) => (text += d));
    s.on("end", () => resolve(text));
    s.on("error", reject);
  });
  const run = async () => {
    for (let i = 0; i < mib; i++) if (!s.write(chunk)) await new Promise((r) => s.once("drain", r));
    s.end();
    return Number(await answer);
  };
  try {
    const received = await withDeadline(run(), MEASURE_DEADLINE_MS, `${mib} MiB through one connection to ${to.host}:${to.port}`);
    if (received !== mib * 2 ** 20) throw new Error(`the sink got ${received} bytes of ${mib * 2 ** 20}`);
    return (mib * 2 ** 20) / 1e6 / ((performance.now() - t) / 1000);
  } finally {
    s.destroy();
  }
}

/** Microseconds of each of `pings` sequential 100-byte round trips to an echo. */
export async function roundTrips(to: Endpoint, pings: number): Promise<number[]> {
  const s = await connect(to);
  const msg = new Uint8Array(100);
  const times: number[] = [];
  let pending: (() => void) | undefined;
  let got = 0;
  s.on("data", (d) => {
    got += d.length;
    if (got >= 100) {
      got -= 100;
      pending?.();
    }
  });
  const run = async () => {
    for (let i = 0; i < pings; i++) {
      const t = performance.now();
      await new Promise<void>((resolve) => {
        pending = resolve;
        s.write(msg);
      });
      times.push((performance.now() - t) * 1000);
    }
  };
  try {
    await withDeadline(run(), MEASURE_DEADLINE_MS, `${pings} round trips to ${to.host}:${to.port}`);
    return times;
  } finally {
    s.destroy();
  }
}
