/**
 * A peer that knows the mesh secret and misbehaves after its handshake, built from the same
 * transport, auth and wire code as a node, to show that one peer's junk drops only that peer.
 */
import { randomBytes } from "node:crypto";
import { authMac, MAC_BYTES, NONCE_BYTES, newNonce } from "../../mesh/auth.ts";
import type { JoinToken } from "../../mesh/join-token.ts";
import { PROTOCOL_VERSION, type Announcement } from "../../mesh/messages.ts";
import { Transport, type PeerConnection } from "../../mesh/transport.ts";
import { encodeFrame, readFrame, StreamKind } from "../../mesh/wire.ts";

export type Junk = "random-bytes" | "oversized-length" | "invalid-json" | "wrong-shape";

function junkBytes(kind: Junk): Uint8Array {
  switch (kind) {
    case "random-bytes":
      return Uint8Array.from(randomBytes(64));
    case "oversized-length":
      return Uint8Array.from([0xff, 0xff, 0xff, 0xf0, 1, 2, 3, 4]);
    case "invalid-json": {
      const body = new TextEncoder().encode("{this is not json");
      const frame = new Uint8Array(4 + body.length);
      new DataView(frame.buffer).setUint32(0, body.length);
      frame.set(body, 4);
      return frame;
    }
    case "wrong-shape":
      return encodeFrame({ v: PROTOCOL_VERSION, type: "announce", announcement: { nodeId: 42, vramBytes: "lots" } });
  }
}

export function fakeAnnouncement(nodeId: string): Announcement {
  return {
    nodeId,
    addresses: [],
    instance: crypto.randomUUID(),
    seq: 1,
    role: "idle",
    vramBytes: 0,
    ramBytes: 0,
    modelsOnDisk: [],
    serving: [],
    seeds: [],
    hosting: false,
    idle: [],
    fetches: true,
    apiPort: 0,
    lastRequest: {},
    meshVersion: "rogue",
    llamaBuild: "none",
    rpcProtocol: "0",
  };
}

export class RoguePeer {
  private constructor(readonly transport: Transport) {}

  static async start(): Promise<RoguePeer> {
    const transport = await Transport.bind({
      secretKey: Uint8Array.from(randomBytes(32)),
      ipv4Addr: "127.0.0.1:0",
      ipv6Addr: "[::1]:0",
      relay: "disabled",
      onConnection: (c) => c.close(0, "rogue takes no calls"),
    });
    return new RoguePeer(transport);
  }

  /** Joins as a proper member (handshake and hello), then sends `junk`; resolves when the node hangs up. */
  async misbehave(token: JoinToken, junk: Junk): Promise<string> {
    const conn = await this.transport.dial(token.addr);
    const control = await conn.openStream();
    const dialerNonce = newNonce();
    await control.send.writeAll(Uint8Array.from([StreamKind.CONTROL, ...dialerNonce]));
    const reply = new Uint8Array(NONCE_BYTES + MAC_BYTES);
    await control.recv.readExact(reply);
    const ctx = { secret: token.secret, dialerId: this.transport.nodeId, acceptorId: conn.remoteId, dialerNonce, acceptorNonce: reply.slice(0, NONCE_BYTES) };
    await control.send.writeAll(authMac("dialer", ctx));
    await control.send.writeAll(encodeFrame({ v: PROTOCOL_VERSION, type: "hello", announcement: fakeAnnouncement(this.transport.nodeId), members: [] }));
    await readFrame(control.recv);
    await control.send.writeAll(junkBytes(junk));
    return conn.closed;
  }

  /** Sends garbage where the handshake should be; resolves when the node hangs up. */
  async garbageHandshake(token: JoinToken): Promise<string> {
    const conn: PeerConnection = await this.transport.dial(token.addr);
    const control = await conn.openStream();
    await control.send.writeAll(Uint8Array.from(randomBytes(200)));
    return conn.closed;
  }

  close(): Promise<void> {
    return this.transport.close();
  }
}
