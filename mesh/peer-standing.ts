/**
 * How a peer stands with this node (pure), from what it shows and this node's own copy of the
 * roster's public key: an owner's machine, a guest (with its pass's name and expiry), or refused
 * with why. What a peer announces is never believed: its vouch must be the roster's signature of
 * its own node id, and its pass the roster's signature, bound to its node id by the pass's key,
 * unexpired and unrevoked. A node that holds no roster judges nobody: every peer is a member, as
 * before rosters.
 */
import type { Standing } from "../placement/trust.ts";
import { bindingHolds, passHolds, vouchHolds, type TrustClaim } from "./roster.ts";
import { shortId } from "../base/short-id.ts";

/** What this node checks peers against: its roster's public key, whether the roster is closed, the passes it revoked. */
export interface Anchor {
  roster: string;
  /** Peers that show neither a vouch nor a pass are refused (else they are guests without a name). */
  closed: boolean;
  revoked: ReadonlySet<string>;
}

export type Verdict =
  | { standing: Exclude<Standing, "guest"> }
  | { standing: "guest"; name?: string; passId?: string; expiresAt?: number }
  | { standing: "refused"; why: string };

const when = (ms: number) => new Date(ms).toISOString().replace(/\.\d+Z$/, "Z");

export function judgePeer(anchor: Anchor | undefined, peerId: string, claim: TrustClaim | undefined, now: number): Verdict {
  if (!anchor) return { standing: "member" };
  if (!claim) {
    return anchor.closed
      ? { standing: "refused", why: "it shows neither a vouch nor a guest pass, and this mesh admits only its owner's machines and guests with a pass" }
      : { standing: "guest" };
  }
  if (claim.roster !== anchor.roster) return { standing: "refused", why: `it belongs to another roster (${shortId(claim.roster)}): join it again with this mesh's token` };
  if (claim.vouch !== undefined) {
    return vouchHolds(anchor.roster, peerId, claim.vouch) ? { standing: "vouched" } : { standing: "refused", why: "its vouch is not the roster's signature of its own node id (a copied vouch proves nothing)" };
  }
  const pass = claim.pass;
  if (!pass || claim.bind === undefined) return { standing: "refused", why: "it names the roster but shows neither a vouch nor a bound pass" };
  if (!passHolds(anchor.roster, pass)) return { standing: "refused", why: "its pass is not signed by this mesh's roster" };
  if (!bindingHolds(anchor.roster, pass, peerId, claim.bind)) return { standing: "refused", why: `its pass ${pass.name} is bound to another node (a copied pass proves nothing)` };
  return stillStands(anchor, { standing: "guest", name: pass.name, passId: pass.id, ...(pass.expiresAt !== undefined ? { expiresAt: pass.expiresAt } : {}) }, now);
}

/** A verdict checked again for what changes without a new claim: a pass revoked since, or expired (no signature checked twice). */
export function stillStands(anchor: Anchor | undefined, v: Verdict, now: number): Verdict {
  if (!anchor || v.standing !== "guest") return v;
  if (v.passId === undefined) return anchor.closed ? { standing: "refused", why: "it shows no guest pass, and this mesh is closed to peers without one" } : v;
  if (anchor.revoked.has(v.passId)) return { standing: "refused", why: `its pass ${v.name} was revoked` };
  if (v.expiresAt !== undefined && v.expiresAt <= now) return { standing: "refused", why: `its pass ${v.name} expired at ${when(v.expiresAt)}` };
  return v;
}
