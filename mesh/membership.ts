/**
 * Authenticated membership over iroh: dial a member, prove the mesh secret both ways, judge how it
 * stands under the roster (`peer-standing.ts`: an owner's machine, a guest, or refused), exchange
 * member lists, dial whoever an owner's machine knows that we did not, and keep every peer's
 * announcement fresh with a heartbeat. A peer that fails authentication, is refused, sends junk,
 * goes quiet or says it is leaving is dropped; nothing it said is passed on. What the roster signed
 * (revocations, passes issued, closing) goes from peer to peer of the same roster.
 */
import type { Log, LogFields } from "../base/log.ts";
import { throttledWarning } from "../base/throttled-log.ts";
import { authMac, MAC_BYTES, NONCE_BYTES, newNonce, verifyMac, type AuthContext } from "./auth.ts";
import type { MemberAddr } from "./join-token.ts";
import { dueRedials, joinBackoffMs, keepWhich, membersToDial, silentPeers } from "./membership-rules.ts";
import { ControlMessageSchema, PROTOCOL_VERSION, type Announcement, type ControlMessage } from "./messages.ts";
import type { Statement } from "./roster.ts";
import { describeStanding, PeerStandings, RefusedError, type PeerJudge, type Standing } from "./peer-standings.ts";
import { shortId } from "../base/short-id.ts";
import { memberAddr, RememberedMembers } from "./remembered-members.ts";
import { LEGACY_LINE, type PeerConnection, type Stream, type Transport } from "./transport.ts";
import { readFrame, StreamKind, WireError, writeFrame } from "../streams/wire.ts";

/** QUIC application close codes we use. */
export const CloseCode = { SHUTDOWN: 0, AUTH_FAILED: 401, DUPLICATE: 409, PROTOCOL: 400, TIMEOUT: 408 } as const;
/** The reason a connection closed as a duplicate carries, as either side's `closed` reports it. */
const DUPLICATE_REASON = "duplicate connection";
export const closedAsDuplicate = (reason: string): boolean => reason.includes(DUPLICATE_REASON);

const AUTH_DEADLINE_MS = 5_000;
/** How long a connection on which a stream just failed takes to report why it closed. */
const CLOSE_REASON_MS = 250;
/** How long a member whose connection closed as a duplicate waits for the one kept to finish its handshake here. */
const REPLACEMENT_MS = 5_000;
/** Members remembered to find the mesh again (each one authenticated once): the most recent ones. */
const REMEMBER_MAX = 1_024;
/** A lost member is dialed again, on a growing pause, for this long. */
const FORGET_LOST_AFTER_MS = 6 * 3_600_000;

export interface Peer {
  id: string;
  conn: PeerConnection;
  control: Stream;
  dialer: string;
  announcement: Announcement;
  lastSeen: number;
  /** The connection has closed (it may still be the peer's while its replacement is in its handshake). */
  ended?: boolean;
  /** How it stands with this node, checked at admission and whenever its claim or the roster changes (`peer-standings.ts`). */
  standing: Standing;
}

export interface MembershipOptions {
  transport: Transport;
  secret: Uint8Array;
  /** Our announcement as it is now. */
  announcement: () => Announcement;
  log: Log;
  heartbeatMs: number;
  peerTimeoutMs: number;
  /** Called whenever a peer joins, leaves or announces. */
  onChange?: () => void;
  /** A peer opened a stream of a kind other than control (its first byte read already). */
  onStream?: (peerId: string, kind: number, stream: Stream) => void;
  /** The roster this node checks its peers against (none: it holds none, and every peer is a member). */
  judge?: PeerJudge;
}

class AuthError extends Error {}
class TimeoutError extends Error {}

function withDeadline<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: Timer | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(`${what} took longer than ${ms} ms`)), ms);
  });
  return Promise.race([p, deadline]).finally(() => clearTimeout(timer));
}


export class Membership {
  readonly peers = new Map<string, Peer>();
  private readonly dialing = new Set<string>();
  /** Members we have known, to find the mesh (or the part of it we lost) again. */
  private readonly remembered = new RememberedMembers(REMEMBER_MAX, FORGET_LOST_AFTER_MS);
  /** Remembered members we lost: how often dialing them failed, and when to try next. */
  private readonly redials = new Map<string, { attempt: number; at: number; since: number }>();
  private rejoining = false;
  private readonly heartbeat: Timer;
  private stopped = false;
  private readonly warnRefused: (fields: LogFields) => void;
  private readonly warnDropped: (fields: LogFields) => void;
  private readonly warnStanding: (fields: LogFields) => void;
  /** Whoever waits for a peer's connection to be replaced (`replacedConnection`): told at each admission. */
  private readonly admissionWaiters = new Set<() => void>();
  /** Each peer's standing under the roster, and the roster's statements passed on. */
  readonly standings: PeerStandings<Peer>;
  readonly selfId: string;

  constructor(private readonly opts: MembershipOptions) {
    this.selfId = opts.transport.nodeId;
    this.warnRefused = throttledWarning(opts.log, "refused a peer that failed authentication");
    this.warnDropped = throttledWarning(opts.log, "dropped a peer during its handshake");
    this.warnStanding = throttledWarning(opts.log, "refused a peer the roster does not admit");
    this.standings = new PeerStandings<Peer>(opts.judge, {
      send: (peer, msg) => void this.send(peer, msg),
      drop: (peer, reason) => this.drop(peer, reason, false),
      forget: (id) => {
        this.remembered.forget(id);
        this.redials.delete(id);
      },
      changed: () => this.changed(),
      log: opts.log,
    });
    this.heartbeat = setInterval(() => this.tick(), opts.heartbeatMs);
  }

  /** Our announcement as last sent to every peer (the heartbeat's): what they know of us, demand included. */
  lastAnnounced: Announcement | undefined;

  /** Our announcement as peers get it now. */
  own(): Announcement {
    return this.opts.announcement();
  }

  private changed(): void {
    this.opts.onChange?.();
  }

  /** Joins through these members (the first one first), retrying with backoff while we have no peer at all. */
  async join(...addrs: MemberAddr[]): Promise<void> {
    for (const addr of addrs.slice(0, REMEMBER_MAX)) if (addr.nodeId !== this.selfId) this.remembered.seen(addr);
    await this.rejoin();
  }

  /** The members we know, the most recently seen first: what a restart dials to find the mesh again. */
  knownMembers(max: number): MemberAddr[] {
    return this.remembered.recent(max);
  }

  /**
   * While we have no peer, dials every member we have known (the join token's first), round after
   * round with backoff: a network blip or a restart of the others must not leave us alone for good.
   */
  private async rejoin(): Promise<void> {
    if (this.rejoining) return;
    this.rejoining = true;
    try {
      for (let attempt = 0; !this.stopped && this.peers.size === 0 && this.remembered.size > 0; attempt++) {
        for (const addr of this.remembered.all()) {
          if (this.remembered.goneForGood(addr.nodeId, Date.now())) continue;
          try {
            await this.dial(addr);
            return;
          } catch (err) {
            this.opts.log.warn("could not join the mesh; retrying", { via: shortId(addr.nodeId), error: (err as Error).message });
          }
        }
        await Bun.sleep(joinBackoffMs(attempt));
      }
    } finally {
      this.rejoining = false;
    }
  }

  /** Dials a member and runs the handshake as the dialer. */
  async dial(addr: MemberAddr): Promise<void> {
    if (addr.nodeId === this.selfId || this.dialing.has(addr.nodeId) || this.peers.has(addr.nodeId)) return;
    this.dialing.add(addr.nodeId);
    try {
      const conn = await this.opts.transport.dial(addr);
      try {
        const control = await conn.openStream();
        const dialerNonce = newNonce();
        const opening = new Uint8Array(1 + NONCE_BYTES);
        opening[0] = StreamKind.CONTROL;
        opening.set(dialerNonce, 1);
        await control.send.writeAll(opening);
        const reply = new Uint8Array(NONCE_BYTES + MAC_BYTES);
        await withDeadline(control.recv.readExact(reply), AUTH_DEADLINE_MS, "the member's proof");
        const ctx: AuthContext = { secret: this.opts.secret, dialerId: this.selfId, acceptorId: conn.remoteId, dialerNonce, acceptorNonce: reply.slice(0, NONCE_BYTES) };
        // Our proof goes out before we check theirs, so a member whose secret differs sees the failure too.
        await control.send.writeAll(authMac("dialer", ctx));
        if (!verifyMac("acceptor", ctx, reply.subarray(NONCE_BYTES))) throw new AuthError("the member could not prove the mesh secret (is the token from this mesh?)");
        await this.sendHello(control);
        const hello = await withDeadline(readFrame(control.recv), AUTH_DEADLINE_MS, "the member's hello");
        this.sameLine(hello);
        const parsed = helloOf(hello);
        this.admit(conn, control, this.selfId, parsed, this.standings.admit(conn.remoteId, parsed.announcement.trust));
      } catch (err) {
        conn.close(err instanceof AuthError || err instanceof RefusedError ? CloseCode.AUTH_FAILED : err instanceof TimeoutError ? CloseCode.TIMEOUT : CloseCode.PROTOCOL, (err as Error).message.slice(0, 100));
        throw err;
      }
    } finally {
      this.dialing.delete(addr.nodeId);
    }
  }

  /** A connection someone dialed to us: their proof first, then ours. */
  async accept(conn: PeerConnection): Promise<void> {
    try {
      const control = await withDeadline(conn.acceptStream(), AUTH_DEADLINE_MS, "the peer's first stream");
      const opening = new Uint8Array(1 + NONCE_BYTES);
      await withDeadline(control.recv.readExact(opening), AUTH_DEADLINE_MS, "the peer's opening");
      if (opening[0] !== StreamKind.CONTROL) throw new AuthError(`first stream of kind ${opening[0]} before authentication`);
      const acceptorNonce = newNonce();
      const ctx: AuthContext = { secret: this.opts.secret, dialerId: conn.remoteId, acceptorId: this.selfId, dialerNonce: opening.slice(1), acceptorNonce };
      const reply = new Uint8Array(NONCE_BYTES + MAC_BYTES);
      reply.set(acceptorNonce, 0);
      reply.set(authMac("acceptor", ctx), NONCE_BYTES);
      await control.send.writeAll(reply);
      const mac = new Uint8Array(MAC_BYTES);
      await withDeadline(control.recv.readExact(mac), AUTH_DEADLINE_MS, "the peer's proof");
      if (!verifyMac("dialer", ctx, mac)) throw new AuthError("the peer could not prove the mesh secret");
      const hello = await withDeadline(readFrame(control.recv), AUTH_DEADLINE_MS, "the peer's hello");
      // Before our hello: a node of the other line, or one the roster refuses, must not take us for a member even for a moment.
      this.sameLine(hello);
      const parsed = helloOf(hello);
      const standing = this.standings.admit(conn.remoteId, parsed.announcement.trust);
      await this.sendHello(control);
      this.admit(conn, control, conn.remoteId, parsed, standing);
    } catch (err) {
      const refused = err instanceof AuthError || err instanceof RefusedError;
      (err instanceof RefusedError ? this.warnStanding : refused ? this.warnRefused : this.warnDropped)({ peer: shortId(conn.remoteId), error: (err as Error).message });
      // A peer refused for its standing is told why (it proved the secret); one that did not prove it learns nothing.
      const reason = err instanceof RefusedError ? err.message.slice(0, 100) : refused ? "authentication failed" : "handshake failed";
      conn.close(refused ? CloseCode.AUTH_FAILED : err instanceof TimeoutError ? CloseCode.TIMEOUT : CloseCode.PROTOCOL, reason);
    }
  }

  private async sendHello(control: Stream): Promise<void> {
    const members = [...this.peers.values()].map((p) => memberAddr(p.announcement));
    await writeFrame(control.send, { v: PROTOCOL_VERSION, type: "hello", announcement: this.opts.announcement(), members });
  }

  /**
   * Refuses a peer of the other iroh line: 0.35 reaches 1.x (not the other way), and an older node
   * given a token of a 1.x mesh would otherwise join it half-way.
   */
  private sameLine(raw: unknown): void {
    const theirs = (raw as { announcement?: { transport?: unknown } } | null)?.announcement?.transport ?? LEGACY_LINE;
    const ours = this.opts.announcement().transport ?? LEGACY_LINE;
    if (theirs !== ours) throw new AuthError(`the peer runs ${String(theirs).slice(0, 16)} and this node runs ${ours}: a mesh runs one iroh line (--transport)`);
  }

  private admit(conn: PeerConnection, control: Stream, dialer: string, hello: Hello, standing: Standing): void {
    if (this.stopped) return void conn.close(CloseCode.SHUTDOWN, "leaving");
    if (hello.announcement.nodeId !== conn.remoteId) throw new WireError("hello names another node than the connection's");
    const existing = this.peers.get(conn.remoteId);
    if (existing) {
      // A closed connection never stays over a live one; between two live ones both ends keep the same.
      const keep = existing.ended ? "incoming" : keepWhich(this.selfId, conn.remoteId, { dialer: existing.dialer, instance: existing.announcement.instance }, { dialer, instance: hello.announcement.instance });
      if (keep === "existing") {
        conn.close(CloseCode.DUPLICATE, DUPLICATE_REASON);
        return;
      }
      this.peers.delete(conn.remoteId);
      existing.conn.close(CloseCode.DUPLICATE, DUPLICATE_REASON);
    }
    const peer: Peer = { id: conn.remoteId, conn, control, dialer, announcement: hello.announcement, lastSeen: Date.now(), standing };
    this.peers.set(peer.id, peer);
    for (const told of [...this.admissionWaiters]) told();
    this.remembered.seen(memberAddr(hello.announcement));
    this.redials.delete(peer.id);
    if (!existing) this.opts.log.info("peer joined", { peer: shortId(peer.id), addresses: hello.announcement.addresses.join(","), standing: describeStanding(standing) });
    void conn.closed.then((reason) => {
      peer.ended = true;
      return this.ended(peer, `connection closed: ${reason}`);
    });
    void this.readLoop(peer);
    void this.acceptStreams(peer);
    // Tell everyone else about the newcomer, and dial whoever the newcomer knows that we do not.
    const update: ControlMessage = { v: PROTOCOL_VERSION, type: "members", members: [memberAddr(hello.announcement)] };
    for (const other of this.peers.values()) if (other !== peer) void this.send(other, update);
    if (this.standings.introduces(peer, this.peers.values(), true)) this.dialUnknown(hello.members);
    this.standings.admitted(peer);
    this.changed();
  }

  private dialUnknown(members: readonly MemberAddr[]): void {
    const known = new Set([...this.peers.keys(), ...this.dialing]);
    for (const m of membersToDial(members, this.selfId, known)) {
      this.dial(m).catch((err) => this.opts.log.warn("could not reach a member", { peer: shortId(m.nodeId), error: (err as Error).message }));
    }
  }

  private async readLoop(peer: Peer): Promise<void> {
    try {
      for (;;) {
        const raw = await readFrame(peer.control.recv);
        if (raw === null) return this.ended(peer, "control stream ended");
        if (this.peers.get(peer.id) !== peer) return;
        this.handle(peer, parseMessage(raw));
      }
    } catch (err) {
      if (this.peers.get(peer.id) !== peer) return;
      if (err instanceof WireError) return this.drop(peer, `sent junk: ${err.message}`, true);
      return this.ended(peer, `control stream failed: ${(err as Error).message}`);
    }
  }

  /** Streams the peer opens after the control stream: their first byte says what they carry. */
  private async acceptStreams(peer: Peer): Promise<void> {
    for (;;) {
      let stream: Stream;
      try {
        stream = await peer.conn.acceptStream();
      } catch {
        return;
      }
      if (this.peers.get(peer.id) !== peer) return;
      void this.dispatch(peer, stream);
    }
  }

  private async dispatch(peer: Peer, stream: Stream): Promise<void> {
    const kind = new Uint8Array(1);
    const refuse = async () => {
      await stream.send.reset(2).catch(() => undefined);
      await stream.recv.stop(2).catch(() => undefined);
    };
    try {
      await withDeadline(stream.recv.readExact(kind), AUTH_DEADLINE_MS, "the stream's kind");
    } catch {
      return refuse();
    }
    if (kind[0] !== StreamKind.CONTROL && this.opts.onStream) return this.opts.onStream(peer.id, kind[0]!, stream);
    await refuse();
  }

  /**
   * Waits up to `timeoutMs` for the peer to be connected by another connection than `old`. Two
   * members that dial each other at once keep one connection and close the other, and the side that
   * closes it may be ahead of this one: the connection kept is still in its handshake here.
   */
  private async replacedConnection(peerId: string, old: PeerConnection, timeoutMs: number): Promise<boolean> {
    const replaced = () => {
      const conn = this.peers.get(peerId)?.conn;
      return conn !== undefined && conn !== old;
    };
    if (replaced()) return true;
    return new Promise((resolve) => {
      const finish = (ok: boolean) => {
        clearTimeout(timer);
        this.admissionWaiters.delete(check);
        resolve(ok);
      };
      const check = () => replaced() && finish(true);
      const timer = setTimeout(() => finish(false), timeoutMs);
      this.admissionWaiters.add(check);
    });
  }

  /**
   * Whether the peer's connection `old`, on which something just failed, has been replaced: closed
   * as a duplicate (then waiting up to REPLACEMENT_MS for the one kept), or already by another.
   */
  async replacedAfterFailure(peerId: string, old: PeerConnection, onDuplicate?: () => void): Promise<boolean> {
    const reason = await Promise.race([old.closed, Bun.sleep(CLOSE_REASON_MS).then(() => "")]);
    if (closedAsDuplicate(reason)) {
      onDuplicate?.();
      return this.replacedConnection(peerId, old, REPLACEMENT_MS);
    }
    const now = this.peers.get(peerId)?.conn;
    return now !== undefined && now !== old;
  }

  /**
   * The peer's connection or control stream ended. A duplicate's end is not the member's: it stays
   * (views, routes and groups unchanged) while the connection kept finishes its handshake here.
   */
  private async ended(peer: Peer, reason: string): Promise<void> {
    if (this.peers.get(peer.id) !== peer) return;
    const waiting = () => this.opts.log.info("a member's connection closed as a duplicate; the member stays while the connection kept finishes its handshake", { peer: shortId(peer.id) });
    if (await this.replacedAfterFailure(peer.id, peer.conn, waiting)) return;
    this.drop(peer, reason, false);
  }

  /** A new stream to a peer, its kind already written; undefined when the peer is not connected. */
  async openStream(peerId: string, kind: number): Promise<Stream | undefined> {
    const peer = this.peers.get(peerId);
    if (!peer) return undefined;
    const stream = await peer.conn.openStream();
    await stream.send.writeAll(Uint8Array.of(kind));
    return stream;
  }

  private handle(peer: Peer, msg: ControlMessage): void {
    peer.lastSeen = Date.now();
    switch (msg.type) {
      case "hello":
        throw new WireError("a second hello");
      case "announce":
        if (msg.announcement.nodeId !== peer.id) throw new WireError("announcement for another node");
        if (msg.announcement.seq >= peer.announcement.seq || msg.announcement.instance !== peer.announcement.instance) {
          const changed = JSON.stringify({ ...msg.announcement, seq: 0 }) !== JSON.stringify({ ...peer.announcement, seq: 0 });
          const claimChanged = JSON.stringify(msg.announcement.trust) !== JSON.stringify(peer.announcement.trust);
          peer.announcement = msg.announcement;
          // A new claim is checked as at admission: a guest may become an owner's machine (or be refused) without reconnecting.
          if (claimChanged && !this.standings.claimChanged(peer)) return;
          if (changed) this.changed();
        }
        return;
      case "members":
        if (this.standings.introduces(peer, this.peers.values(), false)) this.dialUnknown(msg.members);
        return;
      case "leave":
        return this.drop(peer, "left", false);
      case "roster":
        return this.standings.heard(peer, msg.statements, this.peers.values());
    }
  }

  /** The roster's files changed here: every peer is checked again (in full when the keys changed), and told what is new. */
  rosterChanged(added: readonly Statement[], keys: boolean): void {
    this.standings.rosterChanged(this.peers.values(), undefined, added, keys);
  }

  private drop(peer: Peer, reason: string, junk: boolean): void {
    if (this.peers.get(peer.id) !== peer) return;
    this.peers.delete(peer.id);
    peer.conn.close(junk ? CloseCode.PROTOCOL : CloseCode.SHUTDOWN, reason.slice(0, 100));
    (junk ? this.opts.log.warn : this.opts.log.info)("peer left", { peer: shortId(peer.id), reason });
    // A peer that sent junk is not one to find again; one that left on purpose only when we are alone.
    if (junk) this.remembered.forget(peer.id);
    if (junk || reason === "left") this.redials.delete(peer.id);
    if (reason === "left") this.remembered.leftOnPurpose(peer.id, Date.now());
    this.changed();
    if (this.peers.size === 0) void this.rejoin();
  }

  private async send(peer: Peer, msg: ControlMessage): Promise<void> {
    try {
      await writeFrame(peer.control.send, msg);
    } catch (err) {
      await this.ended(peer, `send failed: ${(err as Error).message}`);
    }
  }

  /** Sends our announcement to every peer now (it changed). */
  announce(): void {
    const announcement = this.opts.announcement();
    this.lastAnnounced = announcement;
    const msg: ControlMessage = { v: PROTOCOL_VERSION, type: "announce", announcement };
    for (const peer of this.peers.values()) void this.send(peer, msg);
  }

  private tick(): void {
    const lastSeen = new Map([...this.peers].map(([id, p]) => [id, p.lastSeen]));
    for (const id of silentPeers(lastSeen, Date.now(), this.opts.peerTimeoutMs)) {
      const peer = this.peers.get(id);
      if (peer) this.drop(peer, `silent for over ${this.opts.peerTimeoutMs} ms`, false);
    }
    // A pass that expired since: no signature checked again.
    this.standings.recheck(this.peers.values());
    this.announce();
    this.redialLost(Date.now());
  }

  /** Dials members we lost while keeping others (`dueRedials`), each on its own growing pause. */
  private redialLost(now: number): void {
    if (this.stopped) return;
    const busy = new Set([...this.peers.keys(), ...this.dialing, this.selfId, ...this.remembered.left()]);
    for (const id of dueRedials(this.remembered.ids(), busy, new Map([...this.redials].map(([k, v]) => [k, v.at])), now)) {
      const addr = this.remembered.get(id)!;
      const lost = this.redials.get(id);
      // A member gone this long has left for good (or moved): it is not dialed for ever.
      if (lost && now - lost.since > FORGET_LOST_AFTER_MS) {
        this.remembered.forget(id);
        this.redials.delete(id);
        continue;
      }
      const attempt = (lost?.attempt ?? -1) + 1;
      this.redials.set(id, { attempt, at: now + joinBackoffMs(attempt), since: lost?.since ?? now });
      // Failures are expected while the member is unreachable: the pause grows, nothing to log each time.
      this.dial(addr).catch(() => undefined);
    }
  }

  /** Tells every peer we are leaving and closes every connection. */
  async leave(): Promise<void> {
    this.stopped = true;
    clearInterval(this.heartbeat);
    const peers = [...this.peers.values()];
    this.peers.clear();
    await Promise.all(
      peers.map(async (p) => {
        // Closing at once could discard the unsent message: the peer hangs up when it reads it.
        await withDeadline(
          writeFrame(p.control.send, { v: PROTOCOL_VERSION, type: "leave" }).then(() => p.conn.closed),
          500,
          "leave",
        ).catch(() => undefined);
        p.conn.close(CloseCode.SHUTDOWN, "leaving");
      }),
    );
  }
}

type Hello = Extract<ControlMessage, { type: "hello" }>;

function helloOf(raw: unknown): Hello {
  const hello = parseMessage(raw);
  if (hello.type !== "hello") throw new WireError(`expected hello, got ${hello.type}`);
  return hello;
}

function parseMessage(raw: unknown): ControlMessage {
  const parsed = ControlMessageSchema.safeParse(raw);
  if (!parsed.success) throw new WireError(`control message of the wrong shape: ${parsed.error.issues[0]?.message ?? "invalid"}`);
  return parsed.data;
}
