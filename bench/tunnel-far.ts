#!/usr/bin/env bun
/**
 * The far end of bench/tunnel.ts's one-connection measures, as its own process (on loopback, or in
 * a lab namespace, so the bytes cross a real link): a TCP sink that answers the byte count when the
 * sender half-closes, a TCP echo, and for each an iroh endpoint whose every stream is piped to it by
 * the same pump the RPC tunnels use. Prints one JSON line with the ports and endpoint addresses, then
 * runs until killed.
 *
 *   bun bench/tunnel-far.ts --bind 10.201.0.3
 */
import { randomBytes } from "node:crypto";
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { parseArgs } from "node:util";
import type { MemberAddr } from "../mesh/join-token.ts";
import { Transport } from "../mesh/transport.ts";
import type { Stream } from "../streams/stream.ts";
import { quicToSocket, socketToQuic } from "../tunnel/pump.ts";

export interface FarEnd {
  sink: number;
  echo: number;
  sinkAddr: MemberAddr;
  echoAddr: MemberAddr;
}

const { values } = parseArgs({ options: { bind: { type: "string", default: "127.0.0.1" } } });
const HOST = values.bind!;

function listen(handler: (s: Socket) => void): Promise<Server> {
  const server = createServer({ allowHalfOpen: true, noDelay: true }, handler);
  return new Promise((resolve) => server.listen(0, HOST, () => resolve(server)));
}
const portOf = (s: Server) => (s.address() as { port: number }).port;

const sink = await listen((s) => {
  let n = 0;
  s.on("data", (d) => (n += d.length));
  s.on("end", () => s.end(`${n}`));
  s.on("error", () => s.destroy());
});
const echo = await listen((s) => {
  s.on("data", (d) => s.write(d));
  s.on("error", () => s.destroy());
});

/** An endpoint whose every incoming stream becomes a TCP connection to `port`. */
async function endpointTo(port: number): Promise<MemberAddr> {
  const t = await Transport.bind({
    secretKey: randomBytes(32),
    ipv4Addr: `${HOST}:0`,
    ipv6Addr: "[::1]:0",
    relay: "disabled",
    onConnection: async (conn) => {
      for (;;) {
        let stream: Stream;
        try {
          stream = await conn.acceptStream();
        } catch {
          return;
        }
        const socket = createConnection({ host: HOST, port, noDelay: true, allowHalfOpen: true });
        socket.on("error", () => socket.destroy());
        void Promise.all([quicToSocket(stream.recv, socket, { bytes: 0 }), socketToQuic(socket, stream.send, { bytes: 0 })]);
      }
    },
  });
  return t.addr();
}

const far: FarEnd = { sink: portOf(sink), echo: portOf(echo), sinkAddr: await endpointTo(portOf(sink)), echoAddr: await endpointTo(portOf(echo)) };
console.log(JSON.stringify(far));
