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
import { acceptorHandshake, AUTH_DEADLINE_MS, AuthError, dialerHandshake, parseMessage, TimeoutError, withDeadline, type HandshakeParts, type Hello } from "./handshake.ts";
import type { MemberAddr } from "./join-token.ts";
import { keepWhich, membersToDial } from "./membership-rules.ts";
import { PROTOCOL_VERSION, type Announcement, type ControlMessage } from "./messages.ts";
import type { Statement } from "./roster.ts";
import { describeStanding, PeerStandings, RefusedError, type PeerJudge, type Standing } from "./peer-standings.ts";
import { shortId } from "../base/short-id.ts";
import { memberAddr } from "./remembered-members.ts";
import { Redials, REMEMBER_MAX } from "./redials.ts";
import { DUPLICATE_REASON } from "./replacements.ts";
import type { PeerConnection, Stream, Transport } from "./transport.ts";
import { inRing, PeerTable, type Peer } from "./peer-table.ts";
import { FrameReader, StreamKind, WireError, writeFrame } from "../streams/wire.ts";
import { patched } from "./announcement-delta.ts";
import { ControlSender } from "./control-sender.ts";
import { DialQueue } from "./dial-queue.ts";

/** QUIC application close codes we use. */
export const CloseCode = { SHUTDOWN: 0, AUTH_FAILED: 401, DUPLICATE: 409, PROTOCOL: 400, TIMEOUT: 408 } as const;


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
  /** Where the peers it admits are kept (the node's parts are built with it first); a table of its own where none is given. */
  peers?: PeerTable;
}

/** How often the connections' datagram counts are read: how late a peer's sign of life is seen, at most. */
const LINE_WATCH_MS = 500;

export class Membership {
  readonly peers: PeerTable;
  /** What goes out on the control streams, and what they carried. */
  readonly sender: ControlSender;
  private readonly dialing = new Set<string>();
  private readonly dials: DialQueue;
  /** The members this node has known, to find the mesh (or the part of it it lost) again. */
  private readonly redials: Redials;
  private readonly heartbeat: Timer;
  private readonly lineWatch: Timer;
  private stopped = false;
  private readonly warnRefused: (fields: LogFields) => void;
  private readonly warnDropped: (fields: LogFields) => void;
  private readonly warnStanding: (fields: LogFields) => void;
  /** Each peer's standing under the roster, and the roster's statements passed on. */
  readonly standings: PeerStandings<Peer>;
  readonly selfId: string;
  /** What both sides of a handshake need of this node (`handshake.ts`). */
  private readonly handshake: HandshakeParts;

  constructor(private readonly opts: MembershipOptions) {
    this.peers = opts.peers ?? new PeerTable();
    this.selfId = opts.transport.nodeId;
    this.sender = new ControlSender(this.peers, (peer, err) => this.ended(peer, `send failed: ${err.message}`));
    this.handshake = {
      secret: opts.secret,
      selfId: this.selfId,
      announcement: opts.announcement,
      members: () => [...this.peers.values()].map((p) => memberAddr(p.announcement)),
      admit: (peerId, claim) => this.standings.admit(peerId, claim),
    };
    this.warnRefused = throttledWarning(opts.log, "refused a peer that failed authentication");
    this.warnDropped = throttledWarning(opts.log, "dropped a peer during its handshake");
    this.warnStanding = throttledWarning(opts.log, "refused a peer the roster does not admit");
    this.standings = new PeerStandings<Peer>(opts.judge, {
      send: (peer, msg) => void this.sender.send(peer, msg),
      drop: (peer, reason) => this.drop(peer, reason, false),
      forget: (id) => this.redials.forget(id),
      changed: () => this.changed(),
      log: opts.log,
    });
    this.redials = new Redials({
      dial: (addr) => this.dial(addr),
      alone: () => this.peers.size === 0,
      stopped: () => this.stopped,
      busy: () => [...this.peers.keys(), ...this.dialing, this.selfId],
      log: opts.log,
    });
    this.dials = new DialQueue({
      selfId: this.selfId,
      dial: (addr) => this.dial(addr),
      busy: (id) => this.peers.has(id) || this.dialing.has(id),
      dialing: () => this.dialing.size,
      stopped: () => this.stopped,
      log: opts.log,
    });
    this.heartbeat = setInterval(() => this.tick(), opts.heartbeatMs);
    this.lineWatch = setInterval(() => this.watchLines(), Math.min(LINE_WATCH_MS, opts.heartbeatMs / 4));
  }

  /** Our announcement as peers get it now. */
  own(): Announcement {
    return this.opts.announcement();
  }

  private changed(): void {
    this.opts.onChange?.();
  }

  /** Joins through these members (the first one first), retrying with backoff while we have no peer at all. */
  async join(...addrs: MemberAddr[]): Promise<void> {
    for (const addr of addrs.slice(0, REMEMBER_MAX)) if (addr.nodeId !== this.selfId) this.redials.remembered.seen(addr);
    await this.redials.rejoin();
  }

  /** The members we know, the most recently seen first: what a restart dials to find the mesh again. */
  knownMembers(max: number): MemberAddr[] {
    return this.redials.remembered.recent(max);
  }

  /** Dials a member and runs the handshake as the dialer (`dialerHandshake`). */
  async dial(addr: MemberAddr): Promise<void> {
    if (addr.nodeId === this.selfId || this.dialing.has(addr.nodeId) || this.peers.has(addr.nodeId)) return;
    this.dialing.add(addr.nodeId);
    try {
      const conn = await this.opts.transport.dial(addr);
      try {
        const { control, hello, standing } = await dialerHandshake(conn, this.handshake);
        this.admit(conn, control, this.selfId, hello, standing);
      } catch (err) {
        conn.close(err instanceof AuthError || err instanceof RefusedError ? CloseCode.AUTH_FAILED : err instanceof TimeoutError ? CloseCode.TIMEOUT : CloseCode.PROTOCOL, (err as Error).message.slice(0, 100));
        throw err;
      }
    } finally {
      this.dialing.delete(addr.nodeId);
    }
  }

  /** A connection someone dialed to us (`acceptorHandshake`). */
  async accept(conn: PeerConnection): Promise<void> {
    try {
      const { control, hello, standing } = await acceptorHandshake(conn, this.handshake);
      this.admit(conn, control, conn.remoteId, hello, standing);
    } catch (err) {
      const refused = err instanceof AuthError || err instanceof RefusedError;
      (err instanceof RefusedError ? this.warnStanding : refused ? this.warnRefused : this.warnDropped)({ peer: shortId(conn.remoteId), error: (err as Error).message });
      // A peer refused for its standing is told why (it proved the secret); one that did not prove it learns nothing.
      const reason = err instanceof RefusedError ? err.message.slice(0, 100) : refused ? "authentication failed" : "handshake failed";
      conn.close(refused ? CloseCode.AUTH_FAILED : err instanceof TimeoutError ? CloseCode.TIMEOUT : CloseCode.PROTOCOL, reason);
    }
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
    const now = Date.now();
    const peer: Peer = { id: conn.remoteId, conn, control, dialer, announcement: hello.announcement, lastSeen: now, heardAt: now, standing, watched: true, watchedSince: now };
    this.peers.set(peer.id, peer);
    this.peers.replacements.admitted();
    this.redials.connected(memberAddr(hello.announcement));
    if (!existing) this.opts.log.info("peer joined", { peer: shortId(peer.id), addresses: hello.announcement.addresses.join(","), standing: describeStanding(standing) });
    void conn.closed.then((reason) => {
      peer.ended = true;
      return this.ended(peer, `connection closed: ${reason}`);
    });
    void this.readLoop(peer);
    void this.acceptStreams(peer);
    // Tell everyone else about a newcomer this node had not heard of, and dial whoever the newcomer knows that we do not.
    if (this.dials.admitted(peer.id)) {
      const update: ControlMessage = { v: PROTOCOL_VERSION, type: "members", members: [memberAddr(hello.announcement)] };
      for (const other of this.peers.values()) if (other !== peer) void this.sender.send(other, update);
    }
    if (this.standings.introduces(peer, this.peers.values(), true)) this.dialUnknown(hello.members, false);
    this.standings.admitted(peer);
    this.changed();
  }

  /** Members a peer named that we neither hold nor dial: in its hello, dialed now (paced); in passing, after a pause (`dial-queue.ts`). */
  private dialUnknown(members: readonly MemberAddr[], passing: boolean): void {
    const fresh = membersToDial(members, this.selfId, new Set([...this.peers.keys(), ...this.dialing]));
    if (passing) this.dials.passing(fresh);
    else this.dials.now(fresh);
  }

  private async readLoop(peer: Peer): Promise<void> {
    const frames = new FrameReader(peer.control.recv);
    try {
      for (;;) {
        const frame = await frames.next();
        if (frame === null) return this.ended(peer, "control stream ended");
        if (this.peers.get(peer.id) !== peer) return;
        this.sender.received(frame.bytes);
        this.handle(peer, parseMessage(frame.message));
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
   * The peer's connection or control stream ended. A duplicate's end is not the member's: it stays
   * (views, routes and groups unchanged) while the connection kept finishes its handshake here.
   */
  private async ended(peer: Peer, reason: string): Promise<void> {
    if (this.peers.get(peer.id) !== peer) return;
    const waiting = () => this.opts.log.info("a member's connection closed as a duplicate; the member stays while the connection kept finishes its handshake", { peer: shortId(peer.id) });
    if (await this.peers.replacedAfterFailure(peer.id, peer.conn, { onDuplicate: waiting })) return;
    this.drop(peer, reason, false);
  }

  /** A new stream to a peer, its kind already written; undefined when the peer is not connected. */
  openStream(peerId: string, kind: number): Promise<Stream | undefined> {
    return this.peers.openStream(peerId, kind);
  }

  private handle(peer: Peer, msg: ControlMessage): void {
    peer.lastSeen = peer.heardAt = Date.now();
    // Its event loop runs: whatever a member said of it, it is not silent.
    peer.suspect = undefined;
    switch (msg.type) {
      case "hello":
        throw new WireError("a second hello");
      case "announce":
        if (msg.announcement.nodeId !== peer.id) throw new WireError("announcement for another node");
        if (msg.announcement.seq >= peer.announcement.seq || msg.announcement.instance !== peer.announcement.instance) this.took(peer, msg.announcement);
        return;
      case "patch": {
        const next = patched(peer.announcement, msg);
        if (next === "out of step") return this.sender.want(peer, this.opts.heartbeatMs);
        return this.took(peer, next);
      }
      case "beat":
        if (msg.watch) peer.watchedByAt = peer.heardAt;
        if (msg.seq !== peer.announcement.seq) return this.sender.want(peer, this.opts.heartbeatMs);
        if (msg.demand && JSON.stringify(msg.demand) !== JSON.stringify(peer.announcement.demand)) {
          peer.announcement = { ...peer.announcement, demand: msg.demand };
          this.changed();
        }
        return;
      case "want":
        return this.sender.answerWant(peer, this.opts.announcement(), this.opts.heartbeatMs);
      case "members":
        if (this.standings.introduces(peer, this.peers.values(), false)) this.dialUnknown(msg.members, true);
        return;
      case "lost": {
        // A claim: we probe the member ourselves (`PeerTable.suspectOnWord`).
        const target = this.peers.suspectOnWord(peer, msg.member, Date.now(), this.opts.heartbeatMs);
        return void (target && this.sender.sendNext(target, this.opts.announcement(), true));
      }
      case "leave":
        return this.drop(peer, "left", false);
      case "roster":
        return this.standings.heard(peer, msg.statements, this.peers.values());
    }
  }

  /** A peer's new announcement, whole or patched. */
  private took(peer: Peer, announcement: Announcement): void {
    const changed = JSON.stringify({ ...announcement, seq: 0 }) !== JSON.stringify({ ...peer.announcement, seq: 0 });
    const claimChanged = JSON.stringify(announcement.trust) !== JSON.stringify(peer.announcement.trust);
    peer.announcement = announcement;
    // A new claim is checked as at admission: a guest may become an owner's machine (or be refused) without reconnecting.
    if (claimChanged && !this.standings.claimChanged(peer)) return;
    if (changed) this.changed();
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
    if (junk) this.redials.forget(peer.id);
    else if (reason === "left") this.redials.left(peer.id);
    this.changed();
    // After `changed`: whoever reacts to the loss sees it before a new connection could be admitted.
    if (!junk && reason !== "left") this.redials.lostNow(peer.id);
    if (this.peers.size === 0) void this.redials.rejoin();
  }

  /** Sends every peer what moved in our announcement, now. */
  announce(): void {
    this.sender.broadcast(this.opts.announcement(), false);
  }

  private tick(): void {
    const now = Date.now();
    for (const { peer, reason } of this.peers.silent(now, this.opts.peerTimeoutMs)) this.dropSilent(peer, reason);
    // A pass that expired since: no signature checked again.
    this.standings.recheck(this.peers.values());
    // What moved without a signal (a fetch's progress, the last request's time), and the queues' figures when they moved.
    const cur = this.opts.announcement();
    this.sender.broadcast(cur, this.sender.demandMoved(cur));
    this.redials.due(now);
  }

  /**
   * A peer gone silent. One we watched, not on another member's word, is news to the members that
   * do not watch it: they are told (`lost`), and check it themselves.
   */
  private dropSilent(peer: Peer, reason: string): void {
    if (this.peers.get(peer.id) !== peer) return;
    const tell = peer.watched && !peer.suspect && inRing(peer);
    this.drop(peer, reason, false);
    if (tell) this.sender.lost(peer.id);
  }

  /** A peer that has had nothing of ours for a heartbeat gets a beat (`PeerTable.readLines`). */
  private watchLines(): void {
    const look = this.peers.readLines(this.selfId, Date.now(), this.opts.heartbeatMs);
    for (const peer of look.unanswered) this.dropSilent(peer, "no answer to a probe after a member said it fell silent");
    if (!look.due.length) return;
    const cur = this.opts.announcement();
    for (const peer of look.due) void this.sender.sendNext(peer, cur, true);
  }

  /** Tells every peer we are leaving and closes every connection. */
  async leave(): Promise<void> {
    this.stopped = true;
    this.dials.stop();
    clearInterval(this.heartbeat);
    clearInterval(this.lineWatch);
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
