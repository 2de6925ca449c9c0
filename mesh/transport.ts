/**
 * The only file that imports `@number0/iroh` (pinned at 0.35.0: its streams move Uint8Array, the
 * 1.x binding moves Array<number> at a fraction of the speed). Keeping every iroh call here makes a
 * later move to another version one file of work. Native objects (the node, connections, streams)
 * stay referenced from the wrappers for their whole life: one the garbage collector takes would
 * take its connection with it.
 */
import { createPrivateKey, createPublicKey } from "node:crypto";
import { createSocket } from "node:dgram";
import { networkInterfaces } from "node:os";
import irohPkg from "@number0/iroh/package.json" with { type: "json" };
import type { BiStream as IrohBi, Connection as IrohConnection, Iroh as IrohNode } from "@number0/iroh";
import { formatSocketAddr, parseSocketAddr, reachableAddresses, sameAddresses, type BoundSocket } from "./bound-addresses.ts";
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
  /** Socket addresses to bind (`127.0.0.1:0`, `[::1]:4433`); all interfaces where absent. */
  ipv4Addr?: string;
  ipv6Addr?: string;
  /** Keep the relay URL out of our address (dial direct addresses only). */
  relay: "default" | "disabled";
  onConnection: (conn: PeerConnection) => void;
  /** The endpoint's own address, once it is up, when it differs from the one worked out at start. */
  onAddress?: (addr: MemberAddr) => void;
}

// An Ed25519 private key in PKCS#8 DER is this prefix and then the 32-byte seed (RFC 8410).
const ED25519_PKCS8_PREFIX = Buffer.from("302e020100300506032b657004220420", "hex");

/** The node id iroh gives a secret key: its Ed25519 public key, in hex. */
export function nodeIdOf(secretKey: Uint8Array): string {
  const privateKey = createPrivateKey({ key: Buffer.concat([ED25519_PKCS8_PREFIX, secretKey]), format: "der", type: "pkcs8" });
  const spki = createPublicKey(privateKey).export({ format: "der", type: "spki" });
  return spki.subarray(spki.length - 32).toString("hex");
}

/** An iroh error's message without its Rust stack trace, on one line. */
function irohReason(err: unknown): string {
  return String((err as Error).message ?? err).split(/\n\s*Stack backtrace:/)[0]!.replace(/\s*Caused by:\s*/g, ": ").replace(/\s+/g, " ").trim();
}

/** A free UDP port on `host` (the kernel's choice), or undefined when the family cannot bind there. */
async function freeUdpPort(host: string): Promise<number | undefined> {
  const v6 = host.includes(":");
  const socket = createSocket({ type: v6 ? "udp6" : "udp4", ipv6Only: v6 });
  try {
    return await new Promise<number>((resolve, reject) => {
      socket.once("error", reject);
      socket.bind({ port: 0, address: host, exclusive: true }, () => resolve(socket.address().port));
    });
  } catch {
    return undefined;
  } finally {
    socket.close();
  }
}

/**
 * The sockets to hand iroh, each port 0 made a port free now, so that our address is known before
 * iroh's start (seconds of network probing) is over. Should another process take such a port
 * meanwhile, iroh binds elsewhere and `onAddress` says where. A family asked for that cannot be
 * probed goes to iroh as asked (iroh says what is wrong with it); one not asked for, left to iroh.
 */
async function chooseSockets(opts: Pick<TransportOptions, "ipv4Addr" | "ipv6Addr">): Promise<{ v4?: BoundSocket; v6?: BoundSocket; asked: Record<string, string> }> {
  const asked: Record<string, string> = {};
  const choose = async (key: "ipv4Addr" | "ipv6Addr", fallback: string): Promise<BoundSocket | undefined> => {
    const text = opts[key];
    const s = parseSocketAddr(text ?? fallback);
    if (!s) throw new Error(`cannot bind QUIC to "${text}": expected an IP address and port (127.0.0.1:0, [::1]:4433)`);
    const port = s.port || (await freeUdpPort(s.host));
    if (port === undefined) {
      if (text) asked[key] = text;
      return undefined;
    }
    const socket = { host: s.host, port };
    asked[key] = formatSocketAddr(socket);
    return socket;
  };
  const [v4, v6] = await Promise.all([choose("ipv4Addr", "0.0.0.0:0"), choose("ipv6Addr", "[::]:0")]);
  return { ...(v4 ? { v4 } : {}), ...(v6 ? { v6 } : {}), asked };
}

export class Transport {
  private readonly live = new Set<IrohConnection>();
  private node: IrohNode | undefined;
  /** Resolves once iroh accepts and dials; rejects, with what went wrong, when it cannot start. */
  readonly ready: Promise<void>;

  private constructor(
    readonly nodeId: string,
    private address: MemberAddr,
    private readonly relay: "default" | "disabled",
    start: (self: Transport) => Promise<void>,
  ) {
    this.ready = start(this);
    // Awaited by whoever needs it; a failure nobody awaits yet is no crash.
    this.ready.catch(() => undefined);
  }

  /**
   * Chooses the ports, derives the node id and starts iroh behind them: resolves in milliseconds,
   * with our address as the interfaces say it is. `ready` says when iroh is up (its first network
   * report waits for relay probes, seconds where relays are out of reach); dials wait for it.
   */
  static async start(opts: TransportOptions): Promise<Transport> {
    const sockets = await chooseSockets(opts);
    const nodeId = nodeIdOf(opts.secretKey);
    const early: MemberAddr = { nodeId, addresses: reachableAddresses(sockets, networkInterfaces()) };
    return new Transport(nodeId, early, opts.relay, (self) => self.startIroh(opts, sockets.asked));
  }

  /** Starts and waits until iroh is up (tools and tests that have nothing to do meanwhile). */
  static async bind(opts: TransportOptions): Promise<Transport> {
    const transport = await Transport.start(opts);
    await transport.ready;
    return transport;
  }

  private async startIroh(opts: TransportOptions, bindOpts: Record<string, string>): Promise<void> {
    const { Iroh } = await import("@number0/iroh");
    let node: IrohNode;
    try {
      node = await Iroh.memory({
        secretKey: [...opts.secretKey],
        nodeDiscovery: "None" as never,
        ...bindOpts,
        protocols: {
          // The binding reads an object key as the ALPN's bytes: the key must be the text itself.
          [ALPN_TEXT]: () => ({
            accept: (err: Error | null, conn: IrohConnection) => {
              if (!err) opts.onConnection(this.track(conn));
            },
            shutdown: () => undefined,
          }),
        },
      });
    } catch (err) {
      throw new Error(`the iroh endpoint did not start (${Object.values(bindOpts).join(", ") || "default sockets"}): ${irohReason(err)}`);
    }
    const irohId = await node.net.nodeId();
    if (irohId !== this.nodeId) {
      await node.node.shutdown().catch(() => undefined);
      throw new Error(`iroh gives this key node id ${irohId}, not ${this.nodeId} as announced`);
    }
    this.node = node;
    const a = await node.net.nodeAddr();
    const addr: MemberAddr = { nodeId: a.nodeId, addresses: a.addresses ?? [] };
    if (this.relay === "default" && a.relayUrl) addr.relayUrl = a.relayUrl;
    const changed = !sameAddresses(addr.addresses, this.address.addresses) || addr.relayUrl !== this.address.relayUrl;
    this.address = addr;
    if (changed) opts.onAddress?.(addr);
  }

  /** Keeps the native connection referenced until it closes. */
  private track(conn: IrohConnection): PeerConnection {
    this.live.add(conn);
    const wrapped = new PeerConnection(conn);
    void wrapped.closed.then(() => this.live.delete(conn));
    return wrapped;
  }

  /** Our address as peers should dial it: worked out at start, iroh's own once it is up. */
  addr(): MemberAddr {
    return this.address;
  }

  /** How the connection to a peer goes now, as iroh sees it: over UDP directly, through a relay, both, or neither (yet). */
  async pathTo(nodeId: string): Promise<QuicPathKind> {
    if (!this.node) return "none";
    const { PublicKey } = await import("@number0/iroh");
    const info = await this.node.net.remoteInfo(PublicKey.fromString(nodeId)).catch(() => null);
    const type = String(info?.connType.type ?? "None").toLowerCase();
    return type === "direct" || type === "relay" || type === "mixed" ? type : "none";
  }

  async dial(addr: MemberAddr): Promise<PeerConnection> {
    await this.ready;
    const node = this.node!;
    const target = { nodeId: addr.nodeId, addresses: addr.addresses, ...(this.relay === "default" && addr.relayUrl ? { relayUrl: addr.relayUrl } : {}) };
    return this.track(await node.node.endpoint().connect(target, ALPN));
  }

  async close(): Promise<void> {
    // Still starting: it is stopped once up, or never was.
    await this.ready.catch(() => undefined);
    for (const conn of this.live) {
      try {
        conn.close(0n, new TextEncoder().encode("shutdown"));
      } catch {
        // already closed
      }
    }
    await this.node?.node.shutdown();
  }
}
