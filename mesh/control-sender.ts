/**
 * What goes out on the members' control streams: messages, and our announcement by difference
 * (`announcement-delta.ts`), each encoded once for every peer it goes to, with counts of what was
 * sent and received (`mesh status`, `bench/scale.ts`).
 */
import { encodeFrame } from "../streams/wire.ts";
import { announcementPatch, nextMessage } from "./announcement-delta.ts";
import { PROTOCOL_VERSION, type Announcement, type ControlMessage } from "./messages.ts";
import { asksWatch, inRing, type Peer, type PeerTable } from "./peer-table.ts";

/** What this node's control streams carried since it started. */
export interface ControlCounters {
  sentBytes: number;
  sentMessages: number;
  receivedBytes: number;
  receivedMessages: number;
}

export class ControlSender {
  readonly counters: ControlCounters = { sentBytes: 0, sentMessages: 0, receivedBytes: 0, receivedMessages: 0 };
  /** The queues' figures as last sent to every peer. */
  private sentDemand = "[]";

  constructor(
    private readonly peers: PeerTable,
    /** A send failed: the peer's stream is gone. */
    private readonly failed: (peer: Peer, err: Error) => Promise<void>,
  ) {}

  send(peer: Peer, msg: ControlMessage): Promise<void> {
    return this.sendFrame(peer, encodeFrame(msg));
  }

  /** Whether the queues' figures moved since they last went to every peer. */
  demandMoved(cur: Announcement): boolean {
    return JSON.stringify(cur.demand) !== this.sentDemand;
  }

  /**
   * Tells every peer what it lacks of our announcement `cur` (`nextMessage`): the fields that
   * moved, or the whole of it; with `heartbeat`, a beat to those that hold it already.
   */
  broadcast(cur: Announcement, heartbeat: boolean): void {
    const prev = this.peers.lastSent;
    this.peers.lastSent = cur;
    this.sentDemand = JSON.stringify(cur.demand);
    const frames = new Map<string, Uint8Array>();
    for (const peer of this.peers.values()) void this.sendNext(peer, cur, heartbeat, prev, frames);
  }

  /** Sends `peer` what it lacks of `cur`, reusing the frames already encoded for others. */
  sendNext(peer: Peer, cur: Announcement, heartbeat: boolean, prev?: Announcement, frames = new Map<string, Uint8Array>()): Promise<void> {
    const kind = nextMessage({ beats: peer.announcement.beats, ourSeq: peer.ourSeq }, prev, cur, heartbeat);
    if (kind === "nothing") return Promise.resolve();
    const watch = kind === "beat" && asksWatch(peer);
    const key = watch ? "beat, watch" : kind;
    let frame = frames.get(key);
    if (!frame) {
      const v = PROTOCOL_VERSION;
      const msg: ControlMessage =
        kind === "beat"
          ? { v, type: "beat", seq: cur.seq, ...(cur.demand.length ? { demand: cur.demand } : {}), ...(watch ? { watch } : {}) }
          : kind === "patch"
            ? { v, type: "patch", ...announcementPatch(prev!, cur) }
            : { v, type: "announce", announcement: cur };
      frame = encodeFrame(msg);
      frames.set(key, frame);
    }
    peer.ourSeq = cur.seq;
    return this.sendFrame(peer, frame);
  }

  /** Asks the peer for its whole announcement (a beat or patch out of step with what we hold), once a heartbeat at most. */
  want(peer: Peer, heartbeatMs: number): void {
    if (Date.now() - (peer.wantedAt ?? 0) < heartbeatMs) return;
    peer.wantedAt = Date.now();
    void this.send(peer, { v: PROTOCOL_VERSION, type: "want" });
  }

  /** The peer asked for our whole announcement: answered once a heartbeat at most, as asking again and again costs the asker, not us. */
  answerWant(peer: Peer, cur: Announcement, heartbeatMs: number): void {
    if (Date.now() - (peer.answeredAt ?? 0) < heartbeatMs) return;
    peer.answeredAt = Date.now();
    peer.ourSeq = undefined;
    void this.sendNext(peer, cur, false);
  }

  /** Tells the members in the ring that we dropped `memberId` for silence (`lost`): they check it themselves. */
  lost(memberId: string): void {
    const frame = encodeFrame({ v: PROTOCOL_VERSION, type: "lost", member: memberId } satisfies ControlMessage);
    for (const peer of this.peers.values()) if (inRing(peer)) void this.sendFrame(peer, frame);
  }

  received(bytes: number): void {
    this.counters.receivedBytes += bytes;
    this.counters.receivedMessages++;
  }

  private async sendFrame(peer: Peer, frame: Uint8Array): Promise<void> {
    peer.controlSentAt = Date.now();
    this.counters.sentBytes += frame.length;
    this.counters.sentMessages++;
    try {
      await peer.control.send.writeAll(frame);
    } catch (err) {
      await this.failed(peer, err as Error);
    }
  }
}
