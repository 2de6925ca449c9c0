/**
 * The mesh's transport on `@number0/iroh` 1.x (`iroh1`, the default; installed as the npm alias
 * `iroh1`): the line whose relays outlive 0.35's, and the one whose endpoint can be told to use no
 * relay (0.35 probes the public ones whatever it is told, 3 s where they never answer). Its byte
 * API moves Array<number> (25-90 MB/s where 0.35 moves ~450 MB/s), so bulk goes over the direct
 * TLS path; this line carries control, forwarded requests and fallbacks. Node ids stay hex, as on
 * the 0.35 line. Native objects stay referenced from the wrappers for their whole life.
 */
import { networkInterfaces } from "node:os";
import irohPkg from "iroh1/package.json" with { type: "json" };
import type { BiStream, Connection, Endpoint as IrohEndpoint, EndpointAddr } from "iroh1/index.js";
import { reachableAddresses, sameAddresses } from "./bound-addresses.ts";
import type { MemberAddr } from "./transport-kit.ts";
import { dialableRelay } from "./member-relay.ts";
import { ALPN, chooseSockets, freshSockets, irohReason, portTaken, nodeIdOf, oneLine, type PeerConnection, type QuicPathKind, type Stream, type Transport, type TransportOptions } from "./transport-kit.ts";

type Iroh1 = typeof import("iroh1/index.js");
const load = (): Promise<Iroh1> => import("iroh1/index.js");
const ALPN_BYTES = [...ALPN];
/** How often the endpoint's own address is looked at for a change (its home relay arriving, a new interface). */
const ADDRESS_CHECK_MS = 2_000;
/** Binds tried when the ports are a preference and the one chosen is taken each time. */
const BIND_ATTEMPTS = 3;
const hex = (bytes: number[]) => Buffer.from(bytes).toString("hex");
const closeQuietly = (conn: Connection, reason = "") => {
  try {
    conn.close(0n, [...new TextEncoder().encode(reason)]);
  } catch {
    // already closed
  }
};

export async function describeIroh1(): Promise<string> {
  const { Endpoint } = await load();
  if (typeof Endpoint.builder !== "function") throw new Error("the iroh 1.x native addon loaded without Endpoint.builder");
  return `iroh ${irohPkg.version} (${process.platform}-${process.arch} addon, the default line)`;
}

function wrapStream(bi: BiStream): Stream {
  const send = bi.send;
  const recv = bi.recv;
  return {
    send: {
      writeAll: (b) => oneLine(() => send.writeAll(Array.from(b))),
      finish: () => oneLine(() => send.finish()),
      reset: (code) => oneLine(() => send.reset(BigInt(code))),
    },
    recv: {
      read: async (buf) => {
        if (buf.length === 0) return 0;
        // An empty read is the end of the stream: QUIC never reads zero bytes into room for some.
        const got = await oneLine(() => recv.read(buf.length));
        if (got.length === 0) return null;
        buf.set(got);
        return got.length;
      },
      readExact: async (buf) => void buf.set(await oneLine(() => recv.readExact(buf.length))),
      stop: (code) => oneLine(() => recv.stop(BigInt(code))),
    },
  };
}

class Iroh1Connection implements PeerConnection {
  readonly remoteId: string;
  readonly closed: Promise<string>;

  constructor(private readonly conn: Connection) {
    this.remoteId = hex(conn.remoteId().toBytes());
    this.closed = conn.closed().catch((err: unknown) => irohReason(err));
  }

  async openStream(): Promise<Stream> {
    return wrapStream(await oneLine(() => this.conn.openBi()));
  }

  async acceptStream(): Promise<Stream> {
    return wrapStream(await oneLine(() => this.conn.acceptBi()));
  }

  rttMs(): number {
    return Number(this.conn.rtt() ?? 0);
  }

  datagrams(): { sent: number; received: number } {
    const s = this.conn.stats();
    return { sent: s.udpTxDatagrams, received: s.udpRxDatagrams };
  }

  close(code: number, reason: string): void {
    try {
      this.conn.close(BigInt(code), [...new TextEncoder().encode(reason)]);
    } catch {
      // already closed
    }
  }
}

export class Iroh1Transport implements Transport {
  readonly line = "iroh1" as const;
  /** The endpoint up now: at start, and again while one that stopped on its own is replaced. */
  ready: Promise<void>;
  private endpoint: IrohEndpoint | undefined;
  private readonly live = new Set<Connection>();
  private watch: Timer | undefined;
  private closing = false;

  private constructor(
    readonly nodeId: string,
    private address: MemberAddr,
    private readonly opts: TransportOptions,
    private readonly asked: Record<string, string>,
  ) {
    this.ready = this.startIroh(asked);
    this.ready.catch(() => undefined);
  }

  static async start(opts: TransportOptions): Promise<Iroh1Transport> {
    const sockets = await chooseSockets(opts);
    const nodeId = nodeIdOf(opts.secretKey);
    return new Iroh1Transport(nodeId, { nodeId, addresses: reachableAddresses(sockets, networkInterfaces()) }, opts, sockets.asked);
  }

  private async bind(asked: Record<string, string>): Promise<IrohEndpoint> {
    const { Endpoint, RelayMode } = await load();
    const builder = Endpoint.builder();
    // No discovery service: peers are dialed by the addresses the mesh hands around.
    builder.applyMinimal();
    const relay = this.opts.relay;
    builder.relayMode(relay === "disabled" ? RelayMode.disabled() : relay === "default" ? RelayMode.defaultMode() : RelayMode.customFromUrls(relay));
    builder.secretKey([...this.opts.secretKey]);
    builder.alpns([ALPN_BYTES]);
    for (const addr of Object.values(asked)) builder.bindAddr(addr);
    return builder.bind();
  }

  private async startIroh(first: Record<string, string>): Promise<void> {
    let endpoint: IrohEndpoint;
    for (let asked = first, attempt = 1; ; attempt++) {
      try {
        endpoint = await this.bind(asked);
        break;
      } catch (err) {
        const reason = irohReason(err);
        // A port picked or remembered was taken in the moment before iroh bound it: a free one now (its peers learn it).
        if (this.opts.portsPreferred && portTaken(reason) && attempt < BIND_ATTEMPTS) {
          const fresh = await freshSockets(asked);
          this.opts.log?.info("a QUIC port was taken before the endpoint bound it; binding another", { was: Object.values(asked).join(","), now: Object.values(fresh).join(",") });
          asked = fresh;
          continue;
        }
        throw new Error(`the iroh endpoint did not start (${Object.values(asked).join(", ") || "default sockets"}): ${reason}`);
      }
    }
    const id = hex(endpoint.id().toBytes());
    if (id !== this.nodeId) {
      await endpoint.close().catch(() => undefined);
      throw new Error(`iroh gives this key node id ${id}, not ${this.nodeId} as announced`);
    }
    // Closed while it started (a node stopped as it comes up): that is no failure to start.
    if (this.closing) return void (await endpoint.close().catch(() => undefined));
    this.endpoint = endpoint;
    void this.acceptLoop(endpoint);
    this.noteAddress(endpoint.addr());
    // The home relay comes once the endpoint reaches one: tokens and announcements then carry it.
    // Looked at now and then: the binding's watchAddr panics outside its runtime (1.1.0), ending the process.
    this.watch = setInterval(() => {
      // Thrown in a timer (a token file that cannot be written), it would end the process.
      try {
        this.noteAddress(endpoint.addr());
      } catch {
        // the next look tries again
      }
    }, ADDRESS_CHECK_MS);
    this.watch.unref();
  }

  private noteAddress(own: EndpointAddr): void {
    const bound = this.endpoint!.boundSockets().filter((s) => !s.startsWith("0.0.0.0") && !s.startsWith("[::]"));
    const relayUrl = this.opts.relay !== "disabled" ? own.relayUrl() : null;
    const direct = own.directAddresses().length ? own.directAddresses() : bound;
    const addr: MemberAddr = { nodeId: this.nodeId, addresses: direct.length ? direct : this.address.addresses, ...(relayUrl ? { relayUrl } : {}) };
    if (sameAddresses(addr.addresses, this.address.addresses) && addr.relayUrl === this.address.relayUrl) return;
    this.address = addr;
    this.opts.onAddress?.(addr);
  }

  private async acceptLoop(endpoint: IrohEndpoint): Promise<void> {
    for (;;) {
      const incoming = await endpoint.acceptNext().catch(() => null);
      if (!incoming) return this.stoppedOnItsOwn(endpoint);
      void incoming
        .accept()
        .then((accepting) => accepting.connect())
        // A handshake that fails (a stranger, a timeout) is no connection.
        .then((conn) => {
          if (this.closing) return conn.close(0n, []);
          this.opts.onConnection(this.track(conn));
        }, () => undefined);
    }
  }

  /**
   * An endpoint's accepts end only when it is closed, and QUIC's driver refuses dials ("endpoint
   * stopping") only once it ended. One this transport did not close stopped on its own: nothing
   * reaches it and every dial on it fails from then on, and the node would stay deaf for good. A
   * new one is bound with the same key (`replace`); the old one's connections are gone, and the
   * node redials its members as for any loss.
   */
  private stoppedOnItsOwn(dead: IrohEndpoint): void {
    if (this.closing || this.endpoint !== dead) return;
    this.endpoint = undefined;
    this.opts.log?.warn("the QUIC endpoint stopped on its own; binding a new one with the same key", { sockets: Object.values(this.asked).join(",") });
    clearInterval(this.watch);
    for (const conn of this.live) closeQuietly(conn);
    this.live.clear();
    // Closed here and not kept: its sockets go when its native object does.
    this.ready = this.replace(dead.close().catch(() => undefined));
    this.ready.catch((err: unknown) => this.opts.log?.error("could not bind a new QUIC endpoint; the mesh cannot reach this node", { error: (err as Error).message }));
  }

  /**
   * Binds the same ports where the closed endpoint let go of them; it mostly holds them a while
   * (its native object does), and then others are bound: the node dials its members again, and
   * its hello and announcement carry the new ports.
   */
  private async replace(closed: Promise<void>): Promise<void> {
    await closed;
    try {
      await this.startIroh(this.asked);
    } catch {
      await this.startIroh(Object.fromEntries(Object.entries(this.asked).map(([k, v]) => [k, v.replace(/:\d+$/, ":0")])));
    }
    this.opts.log?.info("a new QUIC endpoint is up", { addresses: this.address.addresses.join(",") });
  }

  private track(conn: Connection): PeerConnection {
    this.live.add(conn);
    const wrapped = new Iroh1Connection(conn);
    void wrapped.closed.then(() => this.live.delete(conn));
    return wrapped;
  }

  addr(): MemberAddr {
    return this.address;
  }

  async pathTo(nodeId: string): Promise<QuicPathKind> {
    const conn = [...this.live].find((c) => hex(c.remoteId().toBytes()) === nodeId);
    const selected = conn?.paths().filter((p) => p.isSelected) ?? [];
    const ip = selected.some((p) => p.isIp);
    const relay = selected.some((p) => p.isRelay);
    return ip && relay ? "mixed" : ip ? "direct" : relay ? "relay" : "none";
  }

  async dial(addr: MemberAddr): Promise<PeerConnection> {
    const { EndpointAddr, EndpointId } = await load();
    const relayUrl = dialableRelay(addr.relayUrl, this.opts.relay, "iroh1");
    // The id is parsed by the binding too: a member's address that is no key fails as one line.
    const connect = (endpoint: IrohEndpoint) => oneLine(() => endpoint.connect(new EndpointAddr(EndpointId.fromBytes([...Buffer.from(addr.nodeId, "hex")]), relayUrl, addr.addresses), ALPN_BYTES));
    const endpoint = await this.up();
    try {
      return this.track(await connect(endpoint));
    } catch (err) {
      // QUIC's own word for an endpoint whose driver ended, though iroh's is not closed.
      if (this.closing || !/endpoint stopping/i.test((err as Error).message)) throw err;
      this.stoppedOnItsOwn(endpoint);
      return this.track(await connect(await this.up()));
    }
  }

  /** The endpoint once it is up; one found closed that this transport did not close is replaced first. */
  private async up(): Promise<IrohEndpoint> {
    for (;;) {
      const ready = this.ready;
      await ready;
      const endpoint = this.endpoint;
      if (endpoint && (this.closing || !endpoint.isClosed())) return endpoint;
      if (endpoint) this.stoppedOnItsOwn(endpoint);
      // Replaced between `ready` and here: the new one's `ready` is awaited next.
      else if (this.ready === ready) throw new Error("the QUIC endpoint is not up");
    }
  }

  async close(): Promise<void> {
    this.closing = true;
    await this.ready.catch(() => undefined);
    for (const conn of this.live) closeQuietly(conn, "shutdown");
    clearInterval(this.watch);
    await this.endpoint?.close();
  }
}
