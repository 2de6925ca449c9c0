/**
 * The only file that imports `@number0/iroh` (pinned at 0.35.0: its streams move Uint8Array, the
 * 1.x binding moves Array<number> at a fraction of the speed). Keeping every iroh call here makes a
 * later move to another version one file of work. Native objects (the node, connections, streams)
 * stay referenced from the wrappers for their whole life: one the garbage collector takes would
 * take its connection with it.
 */
import irohPkg from "@number0/iroh/package.json" with { type: "json" };
import type { BiStream as IrohBi, Connection as IrohConnection, Iroh as IrohNode } from "@number0/iroh";
import type { MemberAddr } from "./join-token.ts";

export const IROH_BINDING_VERSION: string = irohPkg.version;
const ALPN_TEXT = "mesh/1";
export const ALPN = new TextEncoder().encode(ALPN_TEXT);

/** Loads the native addon and says which binding runs (`mesh --version`; proves a compiled mesh carries it). */
export async function describeTransport(): Promise<string> {
  const { Iroh } = await import("@number0/iroh");
  if (typeof Iroh.memory !== "function") throw new Error("the iroh native addon loaded without Iroh.memory");
  return `iroh ${IROH_BINDING_VERSION} (${process.platform}-${process.arch} addon)`;
}

export interface SendSide {
  writeAll(bytes: Uint8Array): Promise<void>;
  finish(): Promise<void>;
  reset(code: number): Promise<void>;
}

export interface RecvSide {
  /** Bytes read into `buf`, or null at the end of the stream. */
  read(buf: Uint8Array): Promise<number | null>;
  readExact(buf: Uint8Array): Promise<void>;
  stop(code: number): Promise<void>;
}

export interface Stream {
  send: SendSide;
  recv: RecvSide;
}

function wrapStream(bi: IrohBi): Stream {
  const send = bi.send;
  const recv = bi.recv;
  return {
    send: {
      writeAll: (b) => send.writeAll(b),
      finish: () => send.finish(),
      reset: (code) => send.reset(BigInt(code)),
    },
    recv: {
      read: async (buf) => {
        const n = await recv.read(buf);
        return n === null ? null : Number(n);
      },
      readExact: (buf) => recv.readExact(buf),
      stop: (code) => recv.stop(BigInt(code)),
    },
  };
}

export class PeerConnection {
  readonly remoteId: string;
  /** Resolves with the reason once the connection is closed, by either side or by a timeout. */
  readonly closed: Promise<string>;

  constructor(private readonly conn: IrohConnection) {
    this.remoteId = conn.remoteNodeId().toString();
    this.closed = conn.closed().catch((err: unknown) => String(err));
  }

  async openStream(): Promise<Stream> {
    return wrapStream(await this.conn.openBi());
  }

  async acceptStream(): Promise<Stream> {
    return wrapStream(await this.conn.acceptBi());
  }

  /** Round-trip time in milliseconds, as QUIC estimates it. */
  rttMs(): number {
    return Number(this.conn.rtt());
  }

  close(code: number, reason: string): void {
    try {
      this.conn.close(BigInt(code), new TextEncoder().encode(reason));
    } catch {
      // already closed
    }
  }
}

export type QuicPathKind = "direct" | "relay" | "mixed" | "none";

export interface TransportOptions {
  secretKey: Uint8Array;
  /** Socket addresses to bind (`127.0.0.1:0`, `[::1]:4433`); iroh's defaults (all interfaces) where absent. */
  ipv4Addr?: string;
  ipv6Addr?: string;
  /** Keep the relay URL out of our address (dial direct addresses only). */
  relay: "default" | "disabled";
  onConnection: (conn: PeerConnection) => void;
}

export class Transport {
  private readonly live = new Set<IrohConnection>();

  private constructor(
    private readonly node: IrohNode,
    readonly nodeId: string,
    private readonly relay: "default" | "disabled",
  ) {}

  static async bind(opts: TransportOptions): Promise<Transport> {
    const { Iroh } = await import("@number0/iroh");
    let transport: Transport | undefined;
    const pending: IrohConnection[] = [];
    const accept = (conn: IrohConnection) => {
      if (!transport) return void pending.push(conn);
      transport.adopt(conn, opts.onConnection);
    };
    const bindOpts: Record<string, string> = {};
    if (opts.ipv4Addr) bindOpts.ipv4Addr = opts.ipv4Addr;
    if (opts.ipv6Addr) bindOpts.ipv6Addr = opts.ipv6Addr;
    const node = await Iroh.memory({
      secretKey: [...opts.secretKey],
      nodeDiscovery: "None" as never,
      ...bindOpts,
      protocols: {
        // The binding reads an object key as the ALPN's bytes: the key must be the text itself.
        [ALPN_TEXT]: () => ({
          accept: (err: Error | null, conn: IrohConnection) => {
            if (!err) accept(conn);
          },
          shutdown: () => undefined,
        }),
      },
    });
    transport = new Transport(node, await node.net.nodeId(), opts.relay);
    for (const conn of pending.splice(0)) transport.adopt(conn, opts.onConnection);
    return transport;
  }

  /** Keeps the native connection referenced until it closes. */
  private track(conn: IrohConnection): PeerConnection {
    this.live.add(conn);
    const wrapped = new PeerConnection(conn);
    void wrapped.closed.then(() => this.live.delete(conn));
    return wrapped;
  }

  private adopt(conn: IrohConnection, handler: (c: PeerConnection) => void): void {
    handler(this.track(conn));
  }

  /** Our address as peers should dial it. */
  async addr(): Promise<MemberAddr> {
    const a = await this.node.net.nodeAddr();
    const addr: MemberAddr = { nodeId: a.nodeId, addresses: a.addresses ?? [] };
    if (this.relay === "default" && a.relayUrl) addr.relayUrl = a.relayUrl;
    return addr;
  }

  /** How the connection to a peer goes now, as iroh sees it: over UDP directly, through a relay, both, or neither (yet). */
  async pathTo(nodeId: string): Promise<QuicPathKind> {
    const { PublicKey } = await import("@number0/iroh");
    const info = await this.node.net.remoteInfo(PublicKey.fromString(nodeId)).catch(() => null);
    const type = String(info?.connType.type ?? "None").toLowerCase();
    return type === "direct" || type === "relay" || type === "mixed" ? type : "none";
  }

  async dial(addr: MemberAddr): Promise<PeerConnection> {
    const target = { nodeId: addr.nodeId, addresses: addr.addresses, ...(this.relay === "default" && addr.relayUrl ? { relayUrl: addr.relayUrl } : {}) };
    return this.track(await this.node.node.endpoint().connect(target, ALPN));
  }

  async close(): Promise<void> {
    for (const conn of this.live) {
      try {
        conn.close(0n, new TextEncoder().encode("shutdown"));
      } catch {
        // already closed
      }
    }
    await this.node.node.shutdown();
  }
}
