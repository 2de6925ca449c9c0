/**
 * The roster as a running node holds it: its keys and the statements it knows, read from the
 * state dir and read again when another writer (the CLI) changes them, the claim it shows its
 * peers, and the verdicts it gives theirs (`peer-standing.ts`). Statements from peers are taken
 * only when the roster signed them; a message with one that does not verify is junk. What it
 * learns, and the guests it sees with each pass, it keeps in the state dir for `mesh guests`.
 */
import type { Log } from "../base/log.ts";
import { judgePeer, stillStands, type Anchor, type Verdict } from "./peer-standing.ts";
import { fileStamp, MAX_SEEN_PASSES, MAX_STATEMENTS, NODES_PER_PASS, readRosterKeys, readRosterLog, ROSTER_FILE, ROSTER_LOG_FILE, updateRosterLog, withStatements, type RosterLog, type SeenPass } from "./roster-files.ts";
import { ownClaim, statementHolds, statementKey, type RosterKeys, type Statement, type TrustClaim } from "./roster.ts";

/** This node's own standing, as its status shows it. */
export type OwnTrust =
  | { state: "unanchored" }
  | { state: "vouched"; roster: string; closed: boolean }
  | { state: "guest"; roster: string; closed: boolean; name?: string; expiresAt?: number; refused?: string };

export class RosterState {
  private keys: RosterKeys | undefined;
  private readonly statements = new Map<string, Statement>();
  private readonly revoked = new Set<string>();
  private closed = false;
  private stamp = "";
  private claimFor: { nodeId: string; claim: TrustClaim } | undefined;
  private readonly seen = new Map<string, SeenPass>();
  private writes: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly stateDir: string,
    private readonly log: Log,
  ) {
    this.refresh();
  }

  /** The keys held: none on an unanchored node. */
  get held(): RosterKeys | undefined {
    return this.keys;
  }

  anchor(): Anchor | undefined {
    return this.keys ? { roster: this.keys.roster, closed: this.closed, revoked: this.revoked } : undefined;
  }

  /** What this node shows its peers (none while it holds no roster). */
  claim(nodeId: string): TrustClaim | undefined {
    if (!this.keys) return undefined;
    if (this.claimFor?.nodeId !== nodeId) this.claimFor = { nodeId, claim: ownClaim(this.keys, nodeId) };
    return this.claimFor.claim;
  }

  own(nodeId: string): OwnTrust {
    const k = this.keys;
    if (!k) return { state: "unanchored" };
    if (k.secret) return { state: "vouched", roster: k.roster, closed: this.closed };
    const v = k.pass ? stillStands(this.anchor(), { standing: "guest", name: k.pass.name, passId: k.pass.id, ...(k.pass.expiresAt ? { expiresAt: k.pass.expiresAt } : {}) }, Date.now()) : judgePeer(this.anchor(), nodeId, this.claim(nodeId), Date.now());
    return { state: "guest", roster: k.roster, closed: this.closed, ...(k.pass ? { name: k.pass.name, ...(k.pass.expiresAt ? { expiresAt: k.pass.expiresAt } : {}) } : {}), ...(v.standing === "refused" ? { refused: v.why } : {}) };
  }

  /** A peer's standing from what it shows (every signature checked); a guest with a pass is noted as seen. */
  judge(peerId: string, claim: TrustClaim | undefined): Verdict {
    const v = judgePeer(this.anchor(), peerId, claim, Date.now());
    if (v.standing === "guest" && v.passId !== undefined) this.sawGuest(v.passId, v.name ?? "", v.expiresAt, peerId);
    return v;
  }

  /** A verdict given before, against what changed since: a revocation, an expiry, the roster closing. */
  recheck(v: Verdict): Verdict {
    return stillStands(this.anchor(), v, Date.now());
  }

  /**
   * Statements a peer sent: those the roster signed are kept (and returned, the new ones), and any
   * that is not signed makes the whole message junk. Known ones cost no signature check.
   */
  learn(statements: readonly Statement[]): { added: Statement[] } | { bad: string } {
    const roster = this.keys?.roster;
    if (!roster) return { added: [] };
    const fresh = statements.filter((s) => !this.statements.has(statementKey(s)));
    for (const s of fresh) if (!statementHolds(roster, s)) return { bad: `a ${s.kind} statement the roster did not sign` };
    const added = this.take(fresh);
    if (added.length) this.persist((log) => withStatements(log, added, statementKey));
    return { added };
  }

  /** What a peer is told: revocations and closing to every peer of the roster; passes issued only to the owner's machines. */
  statementsFor(v: Verdict): Statement[] {
    if (v.standing !== "vouched" && !(v.standing === "guest" && v.passId !== undefined)) return [];
    return [...this.statements.values()].filter((s) => s.kind !== "pass" || v.standing === "vouched");
  }

  /**
   * Reads the files again when another writer changed them (the CLI: a guest pass issued, a
   * revocation, new keys). Says what moved: the keys (every peer is judged again in full), and the
   * statements new to this node (passed on to its peers); undefined when nothing did.
   */
  refresh(): { keys: boolean; added: Statement[] } | undefined {
    const stamp = `${fileStamp(this.stateDir, ROSTER_FILE)}|${fileStamp(this.stateDir, ROSTER_LOG_FILE)}`;
    if (stamp === this.stamp) return undefined;
    this.stamp = stamp;
    let keys: RosterKeys | undefined;
    try {
      keys = readRosterKeys(this.stateDir);
    } catch (err) {
      this.log.error("could not read the roster; this node keeps the one it had", { error: (err as Error).message });
      return undefined;
    }
    const held = (k: RosterKeys | undefined) => JSON.stringify([k?.roster, k?.secret ? "owner" : k?.pass?.id]);
    const keysMoved = held(keys) !== held(this.keys);
    if (keys?.roster !== this.keys?.roster) {
      this.statements.clear();
      this.revoked.clear();
      this.closed = false;
      this.seen.clear();
    }
    this.keys = keys;
    this.claimFor = undefined;
    const kept = readRosterLog(this.stateDir);
    const added = keys ? this.take(kept.statements.filter((s) => !this.statements.has(statementKey(s)) && statementHolds(keys.roster, s))) : [];
    for (const [id, s] of Object.entries(kept.seen)) if (!this.seen.has(id)) this.seen.set(id, s);
    return keysMoved || added.length ? { keys: keysMoved, added } : undefined;
  }

  /** Passes issued and seen, as `mesh guests` lists them. */
  guests(): { passes: Statement[]; seen: ReadonlyMap<string, SeenPass>; revoked: ReadonlySet<string> } {
    return { passes: [...this.statements.values()].filter((s) => s.kind === "pass"), seen: this.seen, revoked: this.revoked };
  }

  /** Waits for the writes under way (a test, or the node stopping). */
  settled(): Promise<unknown> {
    return this.writes;
  }

  private take(statements: readonly Statement[]): Statement[] {
    const added: Statement[] = [];
    for (const s of statements) {
      const key = statementKey(s);
      if (this.statements.has(key)) continue;
      // Revocations and closing are always kept; passes issued only while there is room.
      if (this.statements.size >= MAX_STATEMENTS && s.kind === "pass") continue;
      this.statements.set(key, s);
      added.push(s);
      if (s.kind === "revoke") this.revoked.add(s.passId);
      if (s.kind === "closed") this.closed = true;
    }
    return added;
  }

  private sawGuest(passId: string, name: string, expiresAt: number | undefined, nodeId: string): void {
    const known = this.seen.get(passId);
    if (known?.nodes.includes(nodeId)) return;
    if (!known && this.seen.size >= MAX_SEEN_PASSES) return;
    const entry: SeenPass = { name, ...(expiresAt !== undefined ? { expiresAt } : {}), nodes: [...(known?.nodes ?? []), nodeId].slice(-NODES_PER_PASS), lastSeenAt: Date.now() };
    this.seen.set(passId, entry);
    this.persist((log) => ({ ...log, seen: { ...log.seen, [passId]: entry } }));
  }

  /** One write at a time, in order; a failed one is said and the next goes on. */
  private persist(change: (log: RosterLog) => RosterLog): void {
    this.writes = this.writes
      .then(() => updateRosterLog(this.stateDir, change))
      // The next refresh reads the file again: it may hold what another writer added meanwhile.
      .catch((err: unknown) => this.log.warn("could not keep the roster's log in the state dir", { error: (err as Error).message }));
  }
}
