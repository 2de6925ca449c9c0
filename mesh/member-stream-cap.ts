/**
 * How many HTTP streams members may have this node serve at once. Each may buffer a body of up to
 * --max-body-size and hold a llama-server slot, so the node counts them against the same number as
 * its own front door (--max-connections), and no one member may hold more than its share.
 */

/** Whether a member's stream may be served now, and if so, how to give its place back. */
export type Admission =
  | {
      ok: true;
      /** Counts `bytes` more of this stream's request against its member's and everyone's budget; false (nothing counted) when over either. */
      hold: (bytes: number) => boolean;
      /** Gives the place and every byte held back. */
      release: () => void;
    }
  | { ok: false; reason: string };

export interface BodyBudget {
  /** Bytes of request bodies one member's streams may hold at once, all of them together. */
  perPeerBytes: number;
  /** The same for every member together. */
  totalBytes: number;
}

/**
 * At most `max` streams at once, and one member at most `peerShare` of them, leaving the rest to the
 * others; with a body budget, their request bodies held at once are bounded by member and in all
 * too (each stream's own bound, --max-body-size, times a member's streams was gigabytes).
 */
export class MemberStreamCap {
  readonly perPeer: number;
  private total = 0;
  private readonly byPeer = new Map<string, number>();
  private bytes = 0;
  private readonly bytesByPeer = new Map<string, number>();

  constructor(
    readonly max: number,
    peerShare = 0.5,
    private readonly budget: BodyBudget = { perPeerBytes: Infinity, totalBytes: Infinity },
  ) {
    this.perPeer = Math.max(1, Math.floor(max * peerShare));
  }

  get inUse(): number {
    return this.total;
  }

  /** Request bytes held now, by every member together. */
  get bytesHeld(): number {
    return this.bytes;
  }

  take(peerId: string): Admission {
    if (this.total >= this.max) return { ok: false, reason: `this node is serving ${this.max} mesh requests at once, its limit (--max-connections); retry shortly` };
    const mine = this.byPeer.get(peerId) ?? 0;
    if (mine >= this.perPeer) return { ok: false, reason: `this node serves at most ${this.perPeer} requests at once from one mesh member; retry shortly` };
    this.total++;
    this.byPeer.set(peerId, mine + 1);
    let released = false;
    let held = 0;
    return {
      ok: true,
      hold: (n) => {
        const peerHeld = this.bytesByPeer.get(peerId) ?? 0;
        if (released || peerHeld + n > this.budget.perPeerBytes || this.bytes + n > this.budget.totalBytes) return false;
        held += n;
        this.bytes += n;
        this.bytesByPeer.set(peerId, peerHeld + n);
        return true;
      },
      release: () => {
        // Every way an exchange ends calls this; a place must come back once only.
        if (released) return;
        released = true;
        this.total--;
        decrement(this.byPeer, peerId, 1);
        this.bytes -= held;
        decrement(this.bytesByPeer, peerId, held);
      },
    };
  }
}

function decrement(map: Map<string, number>, key: string, by: number): void {
  const left = (map.get(key) ?? by) - by;
  if (left > 0) map.set(key, left);
  else map.delete(key);
}
