/**
 * A peer that knows the mesh secret and misbehaves after its handshake, built from the same
 * transport, auth and wire code as a node, to show that one peer's junk drops only that peer. It
 * shows what its token lets it show under the mesh's roster: a vouch of its own id with an owner's
 * token (a machine of the owner that lies), a pass bound to its id with a guest's.
 */
import { TEST_LINE } from "./node.ts";
import { randomBytes } from "node:crypto";
import { authMac, MAC_BYTES, NONCE_BYTES, newNonce } from "../mesh/auth.ts";
import type { JoinToken, MemberAddr } from "../mesh/join-token.ts";
import { HEARTBEAT_MS } from "../node/mesh-node.ts";
import { PROTOCOL_VERSION, type Announcement } from "../mesh/messages.ts";
import { nodeSigner, Transport, type Signer, type TransportLine } from "../mesh/transport.ts";
import type { PeerConnection, Stream } from "../streams/stream.ts";
import { directMac, directStatement, encodeDirectHello, type DirectPurpose } from "../tunnel/direct-auth.ts";
import { encodeFrame, readFrame, StreamKind } from "../streams/wire.ts";
import { FileHasher } from "../models/file-hasher.ts";
import { ownClaim, publicKeyOf, type Statement, type TrustClaim } from "../mesh/roster.ts";
import { serveModelStream, type ModelLookup } from "../models/peer-transfer.ts";

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

export function fakeAnnouncement(nodeId: string, line: TransportLine = TEST_LINE): Announcement {
  return {
    nodeId,
    addresses: [],
    instance: crypto.randomUUID(),
    seq: 1,
    role: "idle",
    vramBytes: 0,
    keepsLayouts: true,
    // It reads only whole announcements, as nodes before beats did: every heartbeat brings one.
    beats: false,
    ring: false,
    hostsOnlyGetters: true,
    prefersSeeingHosts: true,
    ramBytes: 0,
    modelsOnDisk: [],
    serving: [],
    seeds: [],
    hosting: false,
    idle: [],
    fetches: true,
    replicating: [],
    takesReplicas: false,
    apiPort: 0,
    lastRequest: {},
    demand: [],
    meshVersion: "rogue",
    // A 0.35 node says nothing of its line, as nodes from before iroh1 do.
    ...(line !== "iroh035" ? { transport: line } : {}),
    llamaBuild: "none",
    rpcProtocol: "0",
  };
}

/** What a node joining with `token` shows of its standing: a vouch (owner's token), a bound pass (guest's), or nothing. */
export function claimOf(token: JoinToken, nodeId: string): TrustClaim | undefined {
  const r = token.roster;
  if (!r) return undefined;
  return r.kind === "owner" ? ownClaim({ roster: publicKeyOf(r.secret), secret: r.secret }, nodeId) : ownClaim({ roster: r.roster, pass: r.pass, passSecret: r.passSecret }, nodeId);
}

export class RoguePeer {
  private constructor(
    readonly transport: Transport,
    /** Signs with the rogue's own node key (`nodeSigner`), as a node's direct-path hello is. */
    readonly sign: Signer,
  ) {}

  /** On the suite's iroh line, or on `line`. */
  static async start(line: TransportLine = TEST_LINE): Promise<RoguePeer> {
    const secretKey = Uint8Array.from(randomBytes(32));
    const transport = await Transport.bind({
      secretKey,
      ipv4Addr: "127.0.0.1:0",
      ipv6Addr: "[::1]:0",
      relay: "disabled",
      line,
      onConnection: (c) => c.close(0, "rogue takes no calls"),
    });
    return new RoguePeer(transport, nodeSigner(secretKey));
  }

  /**
   * The hello a node sends on a worker's direct port: the mesh's MAC and its own signature, for
   * `purpose`; `as` another member's id, signed all the same with its own key.
   */
  directHello(secret: Uint8Array, workerId: string, cert: string, purpose: DirectPurpose = "rpc", as = this.transport.nodeId): Uint8Array {
    return encodeDirectHello(as, directMac(secret, as, workerId, cert, purpose), this.sign(directStatement(as, workerId, cert, purpose)), purpose);
  }

  /** The handshake and hello a node of its line makes: the node's hello, or null when it hung up first. */
  async tryJoin(token: JoinToken, claim: TrustClaim | undefined = claimOf(token, this.transport.nodeId)): Promise<unknown> {
    const attempt = await this.handshake(token, this.announcement(claim)).catch(() => undefined);
    attempt?.conn.close(0, "done");
    return attempt?.hello ?? null;
  }

  /** What it announces at first: nothing of its own but `claim`. */
  private announcement(claim: TrustClaim | undefined): Announcement {
    return { ...fakeAnnouncement(this.transport.nodeId, this.transport.line), ...(claim ? { trust: claim } : {}) };
  }

  /** The dialer's side of the handshake and hello, as a node does it; resolves with the node's hello. */
  private async handshake(token: JoinToken, mine: Announcement) {
    const { conn, control } = await this.prove(token);
    await control.send.writeAll(encodeFrame({ v: PROTOCOL_VERSION, type: "hello", announcement: mine, members: [] }));
    return { conn, control, hello: await readFrame(control.recv) };
  }

  /** The dialer's side of the handshake up to its hello (the node waits for it). */
  private async prove(token: JoinToken) {
    const conn = await this.transport.dial(token.addr);
    const control = await conn.openStream();
    const dialerNonce = newNonce();
    await control.send.writeAll(Uint8Array.from([StreamKind.CONTROL, ...dialerNonce]));
    const reply = new Uint8Array(NONCE_BYTES + MAC_BYTES);
    await control.recv.readExact(reply);
    const ctx = { secret: token.secret, dialerId: this.transport.nodeId, acceptorId: conn.remoteId, dialerNonce, acceptorNonce: reply.slice(0, NONCE_BYTES) };
    await control.send.writeAll(authMac("dialer", ctx));
    return { conn, control };
  }

  /**
   * A second connection of a member (as a node dialing one that dials it at once makes), proved but
   * its hello held: `hello()` sends it and resolves with the membership it carries.
   */
  async heldConnection(token: JoinToken, member: RogueMembership): Promise<{ conn: PeerConnection; hello(): Promise<RogueMembership> }> {
    const { conn, control } = await this.prove(token);
    return {
      conn,
      hello: async () => {
        await control.send.writeAll(encodeFrame({ v: PROTOCOL_VERSION, type: "hello", announcement: member.mine, members: [] }));
        return new RogueMembership(conn, control, member.mine, await readFrame(control.recv));
      },
    };
  }

  /** Joins as a proper member (handshake and hello), then sends `junk`; resolves when the node hangs up. */
  async misbehave(token: JoinToken, junk: Junk): Promise<string> {
    const { conn, control } = await this.handshake(token, this.announcement(claimOf(token, this.transport.nodeId)));
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

  /**
   * Joins as a proper member and stays one (heartbeats), keeping up with the node's announcement,
   * so a test can then misuse what members may use: RPC streams, the direct path.
   */
  async member(token: JoinToken, claim: TrustClaim | undefined = claimOf(token, this.transport.nodeId)): Promise<RogueMembership> {
    const mine = this.announcement(claim);
    const { conn, control, hello } = await this.handshake(token, mine);
    return new RogueMembership(conn, control, mine, hello);
  }

  close(): Promise<void> {
    return this.transport.close();
  }
}

/** A rogue's membership: proved, kept alive by heartbeats, its connection open to misuse. */
export class RogueMembership {
  /** The node's latest announcement (its hello's, then each announce). */
  announcement: Announcement | undefined;
  private readonly heartbeat: Timer;

  constructor(
    readonly conn: PeerConnection,
    private readonly control: Stream,
    /** What it announces: change it and the next heartbeat (every HEARTBEAT_MS / 2) carries the change. */
    readonly mine: Announcement,
    hello: unknown,
  ) {
    this.take(hello);
    this.heartbeat = setInterval(() => {
      mine.seq++;
      void control.send.writeAll(encodeFrame({ v: PROTOCOL_VERSION, type: "announce", announcement: mine })).catch(() => undefined);
    }, HEARTBEAT_MS / 2);
    void this.readLoop();
  }

  /** Control messages the node has sent on this connection (its hello included), and how many of each type. */
  heard = 0;
  readonly heardTypes = new Map<string, number>();

  private take(raw: unknown): void {
    this.heard++;
    const m = raw as { type?: unknown; announcement?: Announcement } | null;
    const type = typeof m?.type === "string" ? m.type : "?";
    this.heardTypes.set(type, (this.heardTypes.get(type) ?? 0) + 1);
    if (m?.announcement) this.announcement = m.announcement;
  }

  /** Sends any control message as it is (the node checks it as it checks a member's). */
  async send(message: unknown): Promise<void> {
    await this.control.send.writeAll(encodeFrame(message));
  }

  /** Stops its own heartbeat: its announcement's seq stays where it is (its QUIC stack still answers). */
  quiet(): void {
    clearInterval(this.heartbeat);
  }

  private async readLoop(): Promise<void> {
    try {
      for (;;) {
        const raw = await readFrame(this.control.recv);
        if (raw === null) return;
        this.take(raw);
      }
    } catch {
      // the node hung up
    }
  }

  /** Kinds (first byte) of the streams the node has opened to it since `recordStreams`; each is then refused. */
  readonly streamsFromNode: number[] = [];

  /**
   * Takes the streams the node opens to it (a forwarded request, an RPC session, a copy), noting
   * each one's kind. With `models`, a copy is served from them (the member's own files under the
   * names it chose); with `kv`, a KV ask is answered by it (`rogue-kv.ts`); with `http`, a request
   * the node forwards (`rogue-http.ts`); every other stream is refused.
   */
  recordStreams(models?: ModelLookup, kv?: (stream: Stream) => Promise<unknown>, http?: (stream: Stream) => Promise<unknown>): void {
    const hasher = new FileHasher();
    void (async () => {
      for (;;) {
        let stream: Stream;
        try {
          stream = await this.conn.acceptStream();
        } catch {
          return;
        }
        const kind = new Uint8Array(1);
        await stream.recv.readExact(kind).catch(() => undefined);
        this.streamsFromNode.push(kind[0]!);
        if (models && kind[0] === StreamKind.MODEL) void serveModelStream(stream, models, hasher);
        else if (kv && kind[0] === StreamKind.KV) void kv(stream);
        else if (http && kind[0] === StreamKind.HTTP) void http(stream);
        else await stream.send.reset(2).catch(() => undefined);
      }
    })();
  }

  /** Tells the node of members, as a node passes on the members it knows. */
  async sendMembers(members: MemberAddr[]): Promise<void> {
    await this.control.send.writeAll(encodeFrame({ v: PROTOCOL_VERSION, type: "members", members }));
  }

  /** Passes on what it says the roster signed, as a node gossips it. */
  async sendStatements(statements: Statement[]): Promise<void> {
    await this.control.send.writeAll(encodeFrame({ v: PROTOCOL_VERSION, type: "roster", statements }));
  }

  /** A stream of `kind` to the node, its kind byte written. */
  async openStream(kind: number): Promise<Stream> {
    const stream = await this.conn.openStream();
    await stream.send.writeAll(Uint8Array.of(kind));
    return stream;
  }

  /** Hangs up (by default as a member leaving; a node closing a duplicate says so). */
  close(code = 0, reason = "rogue leaves"): void {
    clearInterval(this.heartbeat);
    this.conn.close(code, reason);
  }
}
