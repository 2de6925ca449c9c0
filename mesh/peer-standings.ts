/**
 * Membership's side of the roster: each peer's standing, given at admission (a refusal keeps it
 * out, saying why), given again when its claim, the roster's statements or the clock change (a
 * refusal then drops it), and what the roster signed passed from peer to peer of the same roster
 * (a statement the roster did not sign makes its message junk). A guest's word introduces nobody.
 * Without a roster every peer is a member, as before rosters.
 */
import type { Log } from "../base/log.ts";
import { counts } from "../placement/trust.ts";
import type { ControlMessage } from "./messages.ts";
import { PROTOCOL_VERSION, ROSTER_STATEMENTS_PER_MESSAGE } from "./messages.ts";
import type { Verdict } from "./peer-standing.ts";
import type { Statement, TrustClaim } from "./roster.ts";
import { shortId } from "../base/short-id.ts";
import { WireError } from "../streams/wire.ts";

/** A standing a peer keeps while it is one: never refused. */
export type Standing = Exclude<Verdict, { standing: "refused" }>;

/** What membership asks of the roster this node holds (`roster-state.ts`). */
export interface PeerJudge {
  judge(peerId: string, claim: TrustClaim | undefined): Verdict;
  recheck(v: Verdict): Verdict;
  learn(statements: readonly Statement[]): { added: Statement[] } | { bad: string };
  statementsFor(v: Verdict): Statement[];
}

/** A peer refused for its standing, as the status shows it. */
export interface Refusal {
  nodeId: string;
  why: string;
  at: number;
}

/** A peer as this part reads it. */
export interface StandingPeer {
  id: string;
  announcement: { trust?: TrustClaim | undefined };
  standing: Standing;
}

/** What it asks membership to do. */
export interface StandingActions<P extends StandingPeer> {
  send(peer: P, msg: ControlMessage): void;
  drop(peer: P, reason: string): void;
  /** A refused peer is forgotten: not dialed again until someone whose word counts names it. */
  forget(peerId: string): void;
  /** A peer's standing moved. */
  changed(): void;
  log: Log;
}

/** The peer proved the mesh secret but is refused for its standing. */
export class RefusedError extends Error {}

/** Refusals kept for the status: the most recent. */
const REFUSALS_KEPT = 32;
const MEMBER: Standing = { standing: "member" };

/** A standing in a log line or the status: `vouched`, `guest NAME`, `guest (no pass)`, `member`. */
export function describeStanding(v: Verdict): string {
  if (v.standing === "guest") return v.name ? `guest ${v.name}` : "guest (no pass)";
  return v.standing === "refused" ? `refused: ${v.why}` : v.standing;
}

export class PeerStandings<P extends StandingPeer> {
  /** Peers refused for their standing lately, the newest last. */
  readonly refusals: Refusal[] = [];

  constructor(
    private readonly judge: PeerJudge | undefined,
    private readonly act: StandingActions<P>,
  ) {}

  /** A new peer's standing from its hello's claim; a refusal throws `RefusedError` (and is kept for the status). */
  admit(peerId: string, claim: TrustClaim | undefined): Standing {
    const verdict = this.judge?.judge(peerId, claim) ?? MEMBER;
    if (verdict.standing !== "refused") return verdict;
    this.refused(peerId, verdict.why);
    throw new RefusedError(`refused: ${verdict.why}`.slice(0, 200));
  }

  /** A peer just admitted: it is told what the roster signed that it may know. */
  admitted(peer: P): void {
    this.tell(peer, this.judge?.statementsFor(peer.standing) ?? []);
  }

  /**
   * Whether members a peer names are dialed: only when its word counts (a guest could name any
   * address), or for those its hello names while this node knows none of the owner's machines
   * yet: joined through a guest's address, that is the only way to find them.
   */
  introduces(peer: P, peers: Iterable<P>, hello: boolean): boolean {
    return counts(peer.standing.standing) || (hello && ![...peers].some((p) => counts(p.standing.standing)));
  }

  /** Its announcement's claim changed: checked as at admission (false: it was refused and dropped). */
  claimChanged(peer: P): boolean {
    return this.again(peer, this.judge?.judge(peer.id, peer.announcement.trust) ?? MEMBER);
  }

  /** What a pass's expiry takes back, checked each heartbeat without a signature checked twice. */
  recheck(peers: Iterable<P>): void {
    if (this.judge) for (const peer of [...peers]) this.again(peer, this.judge.recheck(peer.standing));
  }

  /** Statements a peer sent: the roster's are kept and passed on; one it did not sign makes the message junk. */
  heard(peer: P, statements: readonly Statement[], peers: Iterable<P>): void {
    if (!this.judge) return;
    const learnt = this.judge.learn(statements);
    if ("bad" in learnt) throw new WireError(learnt.bad);
    if (learnt.added.length === 0) return;
    this.act.log.info("learnt what the roster signed", { from: shortId(peer.id), statements: learnt.added.map((s) => s.kind).join(",") });
    this.rosterChanged(peers, peer.id, learnt.added);
  }

  /**
   * The roster changed (statements learnt from `from`, or this node's own files changed): every
   * peer is checked again (fully when `full`: the keys changed), and told what is new to it.
   */
  rosterChanged(peers: Iterable<P>, from: string | undefined, added: readonly Statement[], full = false): void {
    const judge = this.judge;
    if (!judge) return;
    for (const peer of [...peers]) {
      if (!this.again(peer, full ? judge.judge(peer.id, peer.announcement.trust) : judge.recheck(peer.standing))) continue;
      if (peer.id === from) continue;
      const theirs = new Set(judge.statementsFor(peer.standing));
      this.tell(peer, added.filter((s) => theirs.has(s)));
    }
  }

  /** Gives a peer its new verdict: a refused one is dropped (false); one whose standing moved is told what it may know now. */
  private again(peer: P, verdict: Verdict): boolean {
    if (verdict.standing === "refused") {
      this.refused(peer.id, verdict.why);
      this.act.drop(peer, `refused: ${verdict.why}`);
      return false;
    }
    const before = peer.standing;
    peer.standing = verdict;
    if (JSON.stringify(before) === JSON.stringify(verdict)) return true;
    this.act.log.info("a peer's standing changed", { peer: shortId(peer.id), was: describeStanding(before), now: describeStanding(verdict) });
    // A guest made an owner's machine hears the passes issued, say.
    const had = new Set(this.judge?.statementsFor(before) ?? []);
    this.tell(peer, (this.judge?.statementsFor(verdict) ?? []).filter((s) => !had.has(s)));
    this.act.changed();
    return true;
  }

  private refused(peerId: string, why: string): void {
    this.refusals.push({ nodeId: peerId, why, at: Date.now() });
    if (this.refusals.length > REFUSALS_KEPT) this.refusals.shift();
    this.act.forget(peerId);
  }

  /** Sends a peer what the roster signed, in messages of a bounded size. */
  private tell(peer: P, statements: readonly Statement[]): void {
    for (let i = 0; i < statements.length; i += ROSTER_STATEMENTS_PER_MESSAGE) {
      this.act.send(peer, { v: PROTOCOL_VERSION, type: "roster", statements: statements.slice(i, i + ROSTER_STATEMENTS_PER_MESSAGE) });
    }
  }
}
