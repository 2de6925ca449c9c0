/**
 * How many HTTP streams members may have this node serve at once. Each may buffer a body of up to
 * --max-body-size and hold a llama-server slot, so the node counts them against the same number as
 * its own front door (--max-connections), and no one member may hold more than its share.
 */

import { KeyCounts } from "../base/key-counts.ts";

/** Whether a member's stream may be served now, and if so, how to give its place back. */
export type Admission =
  | {
      ok: true;
      /** Counts `bytes` more of this stream's request against its member's and everyone's budget; false (nothing counted) when over either. */
      hold: (bytes: number) => boolean;
      /** The request's body has been handed on: its bytes come back, the place stays until the answer is done. */
      bodyDone: () => void;
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
  private readonly byPeer = new KeyCounts();
  private bytes = 0;
  private readonly bytesByPeer = new KeyCounts();

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
    if (this.byPeer.of(peerId) >= this.perPeer) return { ok: false, reason: `this node serves at most ${this.perPeer} requests at once from one mesh member; retry shortly` };
    this.total++;
    this.byPeer.add(peerId);
    let released = false;
    let held = 0;
    const giveBytesBack = () => {
      this.bytes -= held;
      this.bytesByPeer.remove(peerId, held);
      held = 0;
    };
    return {
      ok: true,
      hold: (n) => {
        if (released || this.bytesByPeer.of(peerId) + n > this.budget.perPeerBytes || this.bytes + n > this.budget.totalBytes) return false;
        held += n;
        this.bytes += n;
        this.bytesByPeer.add(peerId, n);
        return true;
      },
      bodyDone: giveBytesBack,
      release: () => {
        // Every way an exchange ends calls this; a place must come back once only.
        if (released) return;
        released = true;
        this.total--;
        this.byPeer.remove(peerId);
        giveBytesBack();
      },
    };
  }
}
