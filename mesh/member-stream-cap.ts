/**
 * How many HTTP streams members may have this node serve at once. Each may buffer a body of up to
 * --max-body-size and hold a llama-server slot, so the node counts them against the same number as
 * its own front door (--max-connections), and no one member may hold more than its share.
 */

/** Whether a member's stream may be served now, and if so, how to give its place back. */
export type Admission = { ok: true; release: () => void } | { ok: false; reason: string };

/** At most `max` streams at once, and one member at most `peerShare` of them, leaving the rest to the others. */
export class MemberStreamCap {
  readonly perPeer: number;
  private total = 0;
  private readonly byPeer = new Map<string, number>();

  constructor(
    readonly max: number,
    peerShare = 0.5,
  ) {
    this.perPeer = Math.max(1, Math.floor(max * peerShare));
  }

  get inUse(): number {
    return this.total;
  }

  take(peerId: string): Admission {
    if (this.total >= this.max) return { ok: false, reason: `this node is serving ${this.max} mesh requests at once, its limit (--max-connections); retry shortly` };
    const mine = this.byPeer.get(peerId) ?? 0;
    if (mine >= this.perPeer) return { ok: false, reason: `this node serves at most ${this.perPeer} requests at once from one mesh member; retry shortly` };
    this.total++;
    this.byPeer.set(peerId, mine + 1);
    let released = false;
    return {
      ok: true,
      release: () => {
        // Every way an exchange ends calls this; a place must come back once only.
        if (released) return;
        released = true;
        this.total--;
        const left = (this.byPeer.get(peerId) ?? 1) - 1;
        if (left > 0) this.byPeer.set(peerId, left);
        else this.byPeer.delete(peerId);
      },
    };
  }
}
