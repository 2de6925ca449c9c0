/**
 * The mesh's transport on `@number0/iroh` 0.35 (`--transport iroh035`), kept for meshes founded on it
 * (their tokens name no line) until their relays go: its streams
 * move Uint8Array at ~450 MB/s where the 1.x binding's Array<number> moves 25-90 MB/s. Native
 * objects (the node, connections, streams) stay referenced from the wrappers for their whole life:
 * one the garbage collector takes would take its connection with it.
 */
import { networkInterfaces } from "node:os";
import irohPkg from "@number0/iroh/package.json" with { type: "json" };
import type { BiStream as IrohBi, Connection as IrohConnection, Iroh as IrohNode } from "@number0/iroh";
import { reachableAddresses, sameAddresses } from "./bound-addresses.ts";
import type { MemberAddr } from "./transport-kit.ts";
import { dialableRelay } from "./member-relay.ts";
import { ALPN, ALPN_TEXT, chooseSockets, irohReason, nodeIdOf, oneLine, type PeerConnection, type QuicPathKind, type Stream, type Transport, type TransportOptions } from "./transport-kit.ts";

export const IROH035_VERSION: string = irohPkg.version;

/** Loads the native addon and says which binding it is. */
export async function describeIroh035(): Promise<string> {
  const { Iroh } = await import("@number0/iroh");
  if (typeof Iroh.memory !== "function") throw new Error("the iroh 0.35 native addon loaded without Iroh.memory");
  return `iroh ${IROH035_VERSION} (${process.platform}-${process.arch} addon, --transport iroh035)`;
}

function wrapStream(bi: IrohBi): Stream {
  const send = bi.send;
  const recv = bi.recv;
  return {
    send: {
      writeAll: (b) => oneLine(() => send.writeAll(b)),
      finish: () => oneLine(() => send.finish()),
      reset: (code) => oneLine(() => send.reset(BigInt(code))),
    },
    recv: {
      read: async (buf) => {
        const n = await oneLine(() => recv.read(buf));
        return n === null ? null : Number(n);
      },
      readExact: (buf) => oneLine(() => recv.readExact(buf)),
      stop: (code) => oneLine(() => recv.stop(BigInt(code))),
    },
  };
}

class Iroh035Connection implements PeerConnection {
  readonly remoteId: string;
  /** Resolves with the reason once the connection is closed, by either side or by a timeout. */
  readonly closed: Promise<string>;

  constructor(private readonly conn: IrohConnection) {
    this.remoteId = conn.remoteNodeId().toString();
    this.closed = conn.closed().catch((err: unknown) => irohReason(err));
  }

  async openStream(): Promise<Stream> {
    return wrapStream(await oneLine(() => this.conn.openBi()));
  }

  async acceptStream(): Promise<Stream> {
    return wrapStream(await oneLine(() => this.conn.acceptBi()));
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

export class Iroh035Transport implements Transport {
  readonly line = "iroh035" as const;
  private readonly live = new Set<IrohConnection>();
  private node: IrohNode | undefined;
  /** Resolves once iroh accepts and dials; rejects, with what went wrong, when it cannot start. */
  readonly ready: Promise<void>;

  private constructor(
    readonly nodeId: string,
    private address: MemberAddr,
    private readonly relay: "default" | "disabled",
    start: (self: Iroh035Transport) => Promise<void>,
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
  static async start(opts: TransportOptions): Promise<Iroh035Transport> {
    if (Array.isArray(opts.relay)) throw new Error("relays of your own (--relay URL) need --transport iroh1: the iroh 0.35 binding cannot be given relays");
    const relay = opts.relay;
    const sockets = await chooseSockets(opts);
    const nodeId = nodeIdOf(opts.secretKey);
    const early: MemberAddr = { nodeId, addresses: reachableAddresses(sockets, networkInterfaces()) };
    return new Iroh035Transport(nodeId, early, relay, (self) => self.startIroh(opts, sockets.asked));
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
    const wrapped = new Iroh035Connection(conn);
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
    const relayUrl = dialableRelay(addr.relayUrl, this.relay, "iroh035");
    const target = { nodeId: addr.nodeId, addresses: addr.addresses, ...(relayUrl ? { relayUrl } : {}) };
    return this.track(await oneLine(() => node.node.endpoint().connect(target, ALPN)));
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
