/**
 * What both iroh lines and everything above the mesh share of its transport: the shape of an
 * endpoint and its connections, member addresses, the ALPN, node keys (ids, signatures), iroh's
 * errors on one line, and the sockets chosen before iroh starts. The lines (`transport-iroh1.ts`,
 * `transport-iroh035.ts`) import this file and nothing of `transport.ts`, which loads them
 * lazily: no circle of imports, lazy or not.
 */
import type { Log } from "../base/log.ts";
import { createPrivateKey, createPublicKey, sign, verify } from "node:crypto";
import { createSocket } from "node:dgram";
import type { PeerConnection, RecvSide, SendSide, Stream } from "../streams/stream.ts";
import { formatSocketAddr, parseSocketAddr, type BoundSocket } from "./bound-addresses.ts";

/** Where a member can be reached: its node id, its direct addresses, and the relay it uses (a join token carries one). */
export interface MemberAddr {
  nodeId: string;
  addresses: string[];
  relayUrl?: string;
}

export const ALPN_TEXT = "mesh/1";
export const ALPN = new TextEncoder().encode(ALPN_TEXT);

/** Which iroh line carries the mesh. */
export const TRANSPORT_LINES = ["iroh035", "iroh1"] as const;
export type TransportLine = (typeof TRANSPORT_LINES)[number];
/** The line a mesh is founded on when nothing says otherwise: the one whose relays stay. */
export const DEFAULT_LINE: TransportLine = "iroh1";
/** The line of a token or an announcement that names none: nodes from before iroh1 ran 0.35. */
export const LEGACY_LINE: TransportLine = "iroh035";

// The stream plumbing every floor above uses; the mesh only implements it.
export type { PeerConnection, RecvSide, SendSide, Stream };

/** Which relays a node uses: the line's defaults, none, or the URLs given (`--relay`). */
export const RELAY_MODES = ["default", "disabled"] as const;
export type RelaySetting = (typeof RELAY_MODES)[number] | string[];

export type QuicPathKind = "direct" | "relay" | "mixed" | "none";

export interface TransportOptions {
  secretKey: Uint8Array;
  /** Socket addresses to bind (`127.0.0.1:0`, `[::1]:4433`); all interfaces where absent. */
  ipv4Addr?: string;
  ipv6Addr?: string;
  /** iroh's public relays, none (our address has no relay URL; dial direct addresses only), or these (iroh1 only). */
  relay: "default" | "disabled" | string[];
  /** The iroh line (default DEFAULT_LINE). */
  line?: TransportLine;
  onConnection: (conn: PeerConnection) => void;
  /** The endpoint's own address, once it is up, when it differs from the one worked out at start. */
  onAddress?: (addr: MemberAddr) => void;
  /** Where the transport says what it did on its own (an endpoint bound again). */
  log?: Log;
  /**
   * The ports given are a preference (remembered from the last start, or picked free here), not
   * the operator's: one another process took before iroh bound it is swapped for a free one.
   */
  portsPreferred?: boolean;
}

/** A started endpoint of either line. */
export interface Transport {
  readonly nodeId: string;
  readonly line: TransportLine;
  /** Resolves once the endpoint accepts and dials; rejects, with what went wrong, when it cannot start. */
  readonly ready: Promise<void>;
  /** Our address as peers should dial it: worked out at start, the endpoint's own once it is up. */
  addr(): MemberAddr;
  /** How the connection to a peer goes now: over UDP directly, through a relay, both, or neither (yet). */
  pathTo(nodeId: string): Promise<QuicPathKind>;
  dial(addr: MemberAddr): Promise<PeerConnection>;
  close(): Promise<void>;
}

// Ed25519 keys in DER are these prefixes and then the 32-byte seed (PKCS#8) or public key (SPKI), RFC 8410.
const ED25519_PKCS8_PREFIX = Buffer.from("302e020100300506032b657004220420", "hex");
const ED25519_SPKI_PREFIX = Buffer.from("302a300506032b6570032100", "hex");
export const SIGNATURE_BYTES = 64;

const privateKeyOf = (secretKey: Uint8Array) => createPrivateKey({ key: Buffer.concat([ED25519_PKCS8_PREFIX, secretKey]), format: "der", type: "pkcs8" });

/** The node id iroh gives a secret key: its Ed25519 public key, in hex. */
export function nodeIdOf(secretKey: Uint8Array): string {
  const spki = createPublicKey(privateKeyOf(secretKey)).export({ format: "der", type: "spki" });
  return spki.subarray(spki.length - 32).toString("hex");
}

/** Signs with a node's key: what its id vouches for. */
export type Signer = (message: Uint8Array) => Uint8Array;

export function nodeSigner(secretKey: Uint8Array): Signer {
  const key = privateKeyOf(secretKey);
  return (message) => Uint8Array.from(sign(null, message, key));
}

/** Whether `signature` over `message` is the node's whose id (its Ed25519 public key, in hex) is `nodeId`. */
export function signedBy(nodeId: string, message: Uint8Array, signature: Uint8Array): boolean {
  if (!/^[0-9a-f]{64}$/.test(nodeId) || signature.length !== SIGNATURE_BYTES) return false;
  try {
    const key = createPublicKey({ key: Buffer.concat([ED25519_SPKI_PREFIX, Buffer.from(nodeId, "hex")]), format: "der", type: "spki" });
    return verify(null, message, key, signature);
  } catch {
    return false;
  }
}

/** An iroh error's message without its Rust stack trace, on one line. */
export function irohReason(err: unknown): string {
  return String((err as Error).message ?? err).split(/\n\s*Stack backtrace:/)[0]!.replace(/\s*Caused by:\s*/g, ": ").replace(/\s+/g, " ").trim();
}

/**
 * A call into an iroh binding whose failure becomes an Error of one line (`irohReason`): with
 * RUST_BACKTRACE set, as it is on many developers' machines, the binding's errors carry a whole
 * Rust backtrace, which would otherwise reach the log (a failed join retry) as dozens of lines.
 */
export async function oneLine<T>(call: () => T | Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    throw new Error(irohReason(err));
  }
}

/** `port` bound on `host` for a moment (0: the kernel's choice), or undefined when it cannot be (taken, or the family cannot bind there). */
async function bindUdp(host: string, port: number): Promise<number | undefined> {
  const v6 = host.includes(":");
  const socket = createSocket({ type: v6 ? "udp6" : "udp4", ipv6Only: v6 });
  try {
    return await new Promise<number>((resolve, reject) => {
      socket.once("error", reject);
      socket.bind({ port, address: host, exclusive: true }, () => resolve(socket.address().port));
    });
  } catch {
    return undefined;
  } finally {
    socket.close();
  }
}

/** A free UDP port on `host` (the kernel's choice), or undefined when the family cannot bind there. */
const freeUdpPort = (host: string): Promise<number | undefined> => bindUdp(host, 0);

/** Whether UDP `port` on `host` can be bound now (no other process holds it). */
export const udpPortFree = async (host: string, port: number): Promise<boolean> => (await bindUdp(host, port)) === port;

/**
 * The sockets to hand iroh, each port 0 made a port free now, so that our address is known before
 * iroh's start (seconds of network probing) is over. Another process could take such a port in the
 * moment between; iroh then fails to bind it (measured, 1.x: "Address already in use"): on 1.x,
 * with ports that are a preference, the endpoint binds a free one instead (`freshSockets`);
 * otherwise the node says so. A family asked for that cannot be
 * probed goes to iroh as asked (iroh says what is wrong with it); one not asked for, left to iroh.
 */
/** The same hosts as `asked`, on ports free now: for a bind that found its port taken. */
export async function freshSockets(asked: Record<string, string>): Promise<Record<string, string>> {
  const anyPort = (text: string | undefined) => {
    const s = text === undefined ? undefined : parseSocketAddr(text);
    return s ? formatSocketAddr({ host: s.host, port: 0 }) : undefined;
  };
  const again = await chooseSockets({ ipv4Addr: anyPort(asked.ipv4Addr), ipv6Addr: anyPort(asked.ipv6Addr) });
  return again.asked;
}

/** iroh could not bind a port because another process holds it. */
export const portTaken = (reason: string) => /address already in use/i.test(reason);

export async function chooseSockets(opts: Pick<TransportOptions, "ipv4Addr" | "ipv6Addr">): Promise<{ v4?: BoundSocket; v6?: BoundSocket; asked: Record<string, string> }> {
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

