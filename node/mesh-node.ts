/**
 * This node's place in the mesh: identity and mesh secret from the state dir, the iroh endpoint,
 * authenticated membership, the join token it keeps in the state dir, and announcements kept current.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Config } from "../config/config.ts";
import type { Log } from "../base/log.ts";
import { AnnouncementSource, type AnnouncementContent } from "../mesh/announcement.ts";
import { hasMeshSecret, loadOrCreateNodeKey, resolveMeshSecret } from "../mesh/identity.ts";
import { decodeJoinToken, encodeJoinToken, type MemberAddr, type TokenRoster } from "../mesh/join-token.ts";
import { readJoinToken, writeJoinToken } from "../mesh/join-token-file.ts";
import { Membership } from "../mesh/membership.ts";
import type { PeerTable } from "../mesh/peer-table.ts";
import type { Signal } from "../base/signal.ts";
import { foundRoster, joinRoster } from "../mesh/roster-setup.ts";
import { RosterState, type OwnTrust } from "../mesh/roster-state.ts";
import type { RosterKeys } from "../mesh/roster.ts";
import { decideLine, MEMBERS_KEPT, type LineDecision, readRememberedMesh, rememberMesh, toRemember } from "../mesh/mesh-line.ts";
import { meshStatus, relayShown, type MeshStatus } from "../mesh/status.ts";
import { LEGACY_LINE, nodeIdOf, nodeSigner, Transport, udpPortFree, type QuicPathKind, type Signer, type TransportLine } from "../mesh/transport.ts";
import { parseSocketAddr } from "../mesh/bound-addresses.ts";
import type { Stream } from "../streams/stream.ts";
import { given, settingName } from "../config/layers.ts";

/** Heartbeat and silence limit: a killed peer is gone from every view within about 7 s. */
export const HEARTBEAT_MS = 2_000;
export const PEER_TIMEOUT_MS = 6_000;
const QUIC_PORT_FILE = "quic-ports.json";
/** Where a 0.35 mesh's operator reads how to move it. */
const MOVE_DOCS = 'see "Moving a mesh to iroh 1.x" in the README';

/**
 * The socket addresses to bind (pure). `--quic-bind HOST:PORT` decides the family and host; an
 * IPv4 loopback host pins IPv6 to loopback too, so nothing listens wider than asked. Port 0 means
 * "the port this node had last time, else any": peers remember a node's addresses by its id, and
 * an iroh endpoint that knew an old address takes about 20 s to trust a new one, so a node that
 * restarts on its old ports is back in the mesh at once.
 */
export function bindAddresses(bind: Config["quicBind"], remembered: { v4?: number; v6?: number }): { ipv4Addr?: string; ipv6Addr?: string } {
  const pick = (port: number | undefined, last: number | undefined) => (port ? port : (last ?? 0));
  if (!bind) {
    return {
      ...(remembered.v4 ? { ipv4Addr: `0.0.0.0:${remembered.v4}` } : {}),
      ...(remembered.v6 ? { ipv6Addr: `[::]:${remembered.v6}` } : {}),
    };
  }
  if (bind.host.includes(":")) return { ipv6Addr: `[${bind.host}]:${pick(bind.port, remembered.v6)}` };
  const v4 = { ipv4Addr: `${bind.host}:${pick(bind.port, remembered.v4)}` };
  return bind.host === "127.0.0.1" ? { ...v4, ipv6Addr: `[::1]:${remembered.v6 ?? 0}` } : v4;
}

/** Our bound ports by family, from our addresses. */
export function boundPorts(addresses: readonly string[]): { v4?: number; v6?: number } {
  const port = (a: string | undefined) => (a ? Number(a.split(":").pop()) : undefined);
  const v4 = port(addresses.find((a) => !a.startsWith("[")));
  const v6 = port(addresses.find((a) => a.startsWith("[")));
  return { ...(v4 ? { v4 } : {}), ...(v6 ? { v6 } : {}) };
}

function readPorts(file: string): Ports {
  try {
    const parsed = JSON.parse(readFileSync(file, "utf8")) as { v4?: unknown; v6?: unknown };
    const ok = (p: unknown) => (typeof p === "number" && Number.isInteger(p) && p > 0 && p < 65536 ? p : undefined);
    const v4 = ok(parsed.v4);
    const v6 = ok(parsed.v6);
    return { ...(v4 ? { v4 } : {}), ...(v6 ? { v6 } : {}) };
  } catch {
    return {};
  }
}

type Ports = { v4?: number; v6?: number };

/**
 * The ports this node had last time that no other program has taken since it stopped: a taken one
 * is let go, and the node binds a new port that its peers learn from its hello, rather than not
 * starting at all (iroh fails to bind a port in use).
 */
async function portsStillFree(bind: Config["quicBind"], remembered: Ports): Promise<Ports> {
  const addrs = bindAddresses(bind, remembered);
  const free = async (addr: string | undefined, port: number | undefined) => {
    const socket = addr === undefined ? undefined : parseSocketAddr(addr);
    return port !== undefined && socket?.port === port && (await udpPortFree(socket.host, port)) ? port : undefined;
  };
  const [v4, v6] = await Promise.all([free(addrs.ipv4Addr, remembered.v4), free(addrs.ipv6Addr, remembered.v6)]);
  return { ...(v4 ? { v4 } : {}), ...(v6 ? { v6 } : {}) };
}

/** The line the join token in the state dir names (a token that names none is 0.35's), or undefined when there is none to read. */
function lineOfTokenFile(stateDir: string): TransportLine | undefined {
  const text = readJoinToken(stateDir);
  if (!text) return undefined;
  try {
    return decodeJoinToken(text).line ?? LEGACY_LINE;
  } catch {
    return undefined;
  }
}

/** What a token made by this node carries of its roster: the owner's key, or this guest's own pass. */
function tokenRoster(keys: RosterKeys | undefined): TokenRoster | undefined {
  if (keys?.secret) return { kind: "owner", secret: keys.secret };
  if (keys?.pass && keys.passSecret) return { kind: "guest", roster: keys.roster, pass: keys.pass, passSecret: keys.passSecret };
  return undefined;
}

export interface MeshNode {
  nodeId: string;
  /** The mesh secret (proofs on the direct RPC path are made with it). */
  secret: Uint8Array;
  /** Signs with this node's key (the direct path's hello: the id it names is its own). */
  sign: Signer;
  /** The join token as it is now: made at once, made again when the endpoint's own address arrives. */
  readonly token: string;
  /** Where the token is kept (`mesh token` prints it), and whether this start wrote it first. */
  tokenFile: { path: string; first: boolean };
  /** Resolves once the endpoint accepts and dials (peers can use the token); rejects if it cannot start. */
  ready: Promise<void>;
  founded: boolean;
  /** The iroh line the mesh runs, and whether this start moved it there from the other one. */
  line: TransportLine;
  moved: boolean;
  membership: Membership;
  /** The roster this node holds (none on an unanchored node), read again when its files change. */
  roster: RosterState;
  /** How this node stands under its roster. */
  trust(): OwnTrust;
  status(): MeshStatus;
  /** How the QUIC connection to a peer goes now (direct UDP, relay, both, none). */
  quicPath(peerId: string): Promise<QuicPathKind>;
  /** Says goodbye to every peer and closes the endpoint. */
  stop(): Promise<void>;
}

export interface MeshHooks {
  /** What we announce, given our address. */
  content: (nodeId: string, addresses: string[], relayUrl?: string) => Omit<AnnouncementContent, "ring">;
  /** A peer opened a data stream (RPC tunnel, HTTP). */
  onStream: (peerId: string, kind: number, stream: Stream) => void;
  /** Peers joined, left or announced something new. */
  onPeersChange: () => void;
  /** Where the membership keeps its peers (the node's parts read them there). */
  peers: PeerTable;
  /** Emitted by the node's parts when something they announce moved: sent then, if the announcement changed. */
  moved: Signal;
}

/**
 * Who this node is in its mesh, worked out from the state dir and the flags before anything else
 * is built (no network): its key and id, the mesh's secret, the iroh line, and the roster it holds.
 * Every part of the node is built with it; `startMesh` brings the endpoint up behind it.
 */
export interface MeshIdentity {
  nodeId: string;
  secretKey: Uint8Array;
  /** The mesh secret (proofs on the direct RPC path are made with it). */
  secret: Uint8Array;
  /** Signs with this node's key (the direct path's hello: the id it names is its own). */
  sign: Signer;
  founded: boolean;
  /** The line the mesh runs on, its relays, and whether this start moves it there. */
  lineChoice: LineDecision;
  /** The roster this node holds (none on an unanchored node), read again when its files change. */
  roster: RosterState;
  /** How this node stands under its roster. */
  trust(): OwnTrust;
}

/** This node's identity in its mesh (`MeshIdentity`): made on a first start, read from the state dir after. */
export async function meshIdentity(config: Config, log: Log): Promise<MeshIdentity> {
  mkdirSync(config.stateDir, { recursive: true, mode: 0o700 });
  const remembered = readRememberedMesh(config.stateDir);
  const lineChoice = decideLine({
    asked: given(config, "transport") ? config.transport : undefined,
    askedFrom: settingName(config, "transport"),
    askedRelay: given(config, "relay") ? config.relay : undefined,
    token: config.join,
    remembered,
    member: hasMeshSecret(config.stateDir),
    ...(remembered ? {} : { legacyLine: lineOfTokenFile(config.stateDir) }),
  });
  const { line, relay } = lineChoice;
  const secretKey = loadOrCreateNodeKey(config.stateDir);
  if (lineChoice.relaysFrom) log.info(`using the mesh's own relays, from the ${lineChoice.relaysFrom === "token" ? "join token" : "state dir"}`, { relays: (relay as string[]).join(",") });
  if (lineChoice.movedFrom) log.warn(`this node's mesh moves from ${lineChoice.movedFrom} to ${line}: its members join again with the new join token (${MOVE_DOCS})`);
  // Said once a start: a mesh that needs a relay stops forming when they go.
  if (line === "iroh035") log.warn(`this mesh runs on iroh 0.35, whose public relays are being retired (kept for six months from iroh 1.0, 2026-06-15): move it to iroh1 (${MOVE_DOCS})`);
  const { secret, founded } = resolveMeshSecret(config.stateDir, config.join?.secret);
  rememberMesh(config.stateDir, toRemember(lineChoice));
  // A token's roster is kept (the owner's key, or a guest's pass); a new mesh makes its own, closed from its start.
  if (config.join?.roster) joinRoster(config.stateDir, config.join.roster);
  else if (founded) await foundRoster(config.stateDir, false);
  const roster = new RosterState(config.stateDir, log);
  const nodeId = nodeIdOf(secretKey);
  return { nodeId, secretKey, secret, sign: nodeSigner(secretKey), founded, lineChoice, roster, trust: () => roster.own(nodeId) };
}

/**
 * Starts this node's part of the mesh as `identity`. Resolves in milliseconds, with the join token
 * and the first announcement made from the ports chosen; the endpoint comes up behind it
 * (`ready`), and the token and announcement are made again should its own address differ.
 */
export async function startMesh(config: Config, identity: MeshIdentity, hooks: MeshHooks, log: Log): Promise<MeshNode> {
  const { secretKey, secret, founded, lineChoice, roster } = identity;
  const { line, relay } = lineChoice;
  let membership: Membership | undefined;
  const early: Parameters<Membership["accept"]>[0][] = [];
  const portFile = join(config.stateDir, QUIC_PORT_FILE);
  let up = false;
  const lastPorts = readPorts(portFile);
  const ports = await portsStillFree(config.quicBind, lastPorts);
  if (ports.v4 !== lastPorts.v4 || ports.v6 !== lastPorts.v6) log.info("a QUIC port this node had last time is taken now; it binds another, which its peers learn when it dials them", { was: JSON.stringify(lastPorts) });
  const transport = await Transport.start({
    secretKey,
    ...bindAddresses(config.quicBind, ports),
    // A port the operator gave is theirs to fix; a remembered or picked one may change.
    portsPreferred: !config.quicBind?.port,
    relay,
    line,
    log,
    onConnection: (conn) => (membership ? void membership.accept(conn) : void early.push(conn)),
    onAddress: (addr) => {
      log.info("the endpoint's address differs from the one worked out at start; the join token is made again", { addresses: addr.addresses.join(",") });
      keep(addr);
      announceIfChanged();
    },
  });
  let token = "";
  const keep = (addr: MemberAddr) => {
    writeFileSync(portFile, `${JSON.stringify(boundPorts(addr.addresses))}\n`);
    const held = tokenRoster(roster.held);
    token = encodeJoinToken({ addr, secret, line, ...(Array.isArray(relay) ? { relays: relay } : {}), ...(held ? { roster: held } : {}) });
    return writeJoinToken(config.stateDir, token);
  };
  const tokenFile = keep(transport.addr());
  const source = new AnnouncementSource(() => {
    const addr = transport.addr();
    const trust = roster.claim(addr.nodeId);
    // The ring needs datagram counts, which only iroh 1.x connections keep (`mesh/watch-ring.ts`).
    return { ...hooks.content(addr.nodeId, addr.addresses, addr.relayUrl), transport: line, ring: line === "iroh1", ...(trust ? { trust } : {}) };
  });
  membership = new Membership({
    transport,
    secret,
    announcement: () => source.current().announcement,
    log,
    heartbeatMs: HEARTBEAT_MS,
    peerTimeoutMs: PEER_TIMEOUT_MS,
    onStream: hooks.onStream,
    onChange: hooks.onPeersChange,
    judge: roster,
    peers: hooks.peers,
  });
  const m = membership;
  /** Sends our announcement now if it changed since the last one. */
  function announceIfChanged(): void {
    if (source.current().changed) membership?.announce();
  }
  const unsubscribe = hooks.moved.subscribe(announceIfChanged);
  // The CLI changes the roster's files (a pass issued, a revocation, `mesh roster join`): read within a heartbeat.
  const rosterWatch = setInterval(() => {
    const moved = roster.refresh();
    if (!moved) return;
    log.info(moved.keys ? "this node's roster changed" : "the roster signed something new", { trust: roster.own(transport.nodeId).state, statements: moved.added.map((s) => s.kind).join(",") || "none" });
    if (moved.keys) keep(transport.addr());
    m.rosterChanged(moved.added, moved.keys);
    announceIfChanged();
    hooks.onPeersChange();
  }, HEARTBEAT_MS);
  for (const conn of early.splice(0)) void m.accept(conn);
  const ready = transport.ready.then(() => void (up = true));
  ready.catch(() => undefined);
  // Dials wait for the endpoint anyway; one that cannot start has no mesh to join.
  const via = [...(lineChoice.via ? [lineChoice.via] : []), ...(lineChoice.members ?? [])];
  if (via.length) void ready.then(() => m.join(...via), () => undefined);
  return {
    nodeId: transport.nodeId,
    secret,
    sign: identity.sign,
    get token() {
      return token;
    },
    tokenFile,
    ready,
    founded,
    line,
    moved: lineChoice.movedFrom !== undefined,
    membership: m,
    roster,
    trust: identity.trust,
    status: () => ({ ...meshStatus(m), state: up ? "running" : "starting", line, relay: relayShown(relay, transport.addr().relayUrl), trust: roster.own(transport.nodeId) }),
    quicPath: (peerId) => transport.pathTo(peerId),
    stop: async () => {
      clearInterval(rosterWatch);
      unsubscribe();
      // A founder has no token to find its mesh with after a restart, and the members it leaves forget it while they have each other.
      try {
        rememberMesh(config.stateDir, toRemember(lineChoice, m.knownMembers(MEMBERS_KEPT)));
      } catch (err) {
        log.warn("could not keep the members in the state dir", { error: (err as Error).message });
      }
      await m.leave();
      await transport.close();
    },
  };
}
