/**
 * Announcements by difference (pure): what moved between two of this node's announcements (a
 * `patch`), and a peer's announcement with its patch applied. A node sends its whole announcement
 * once per connection; after that a heartbeat is a `beat` of a few bytes and a change is the
 * fields that moved, so what an idle node sends grows with its peers, not with what it holds.
 */
import { WireError } from "../streams/wire.ts";
import { AnnouncementSchema, PATCHABLE, type Announcement, type ControlMessage } from "./messages.ts";

export type Patch = Extract<ControlMessage, { type: "patch" }>;

const same = (a: unknown, b: unknown) => a === b || JSON.stringify(a) === JSON.stringify(b);

/** The fields of `cur` that differ from `prev`: set when new or changed, unset when gone. */
export function announcementPatch(prev: Announcement, cur: Announcement): Omit<Patch, "v" | "type"> {
  const set: Record<string, unknown> = {};
  const unset: string[] = [];
  for (const key of PATCHABLE as (keyof Announcement)[]) {
    const [a, b] = [prev[key], cur[key]];
    if (b === undefined) {
      if (a !== undefined) unset.push(key);
    } else if (a === undefined || !same(a, b)) set[key] = b;
  }
  return { base: prev.seq, seq: cur.seq, set, unset };
}

/**
 * The peer's announcement after `patch`, checked whole as a fresh one is; "out of step" when the
 * patch does not follow the announcement held of it (then the whole one is asked for). A patch
 * that makes an announcement the schema refuses is junk, as such an announcement would be.
 */
export function patched(held: Announcement, patch: Omit<Patch, "v" | "type">): Announcement | "out of step" {
  if (patch.base !== held.seq || patch.seq <= held.seq) return "out of step";
  const merged: Record<string, unknown> = { ...held, ...patch.set, seq: patch.seq };
  for (const key of patch.unset) delete merged[key];
  const parsed = AnnouncementSchema.safeParse(merged);
  if (!parsed.success) throw new WireError(`a patch makes an announcement peers refuse: ${parsed.error.issues[0]?.message ?? "invalid"}`);
  return parsed.data;
}

/** What a peer holds of this node's announcement, and whether it reads beats and patches. */
export interface PeerHolds {
  beats: boolean;
  /** The seq of ours it holds (none: not known, it gets the whole one). */
  ourSeq: number | undefined;
}

/**
 * What to send a peer now (pure): `heartbeat` on the heartbeat's beat, else because our
 * announcement moved from `prev` to `cur`. A peer of an older version gets the whole announcement
 * each time, as it always did; one that reads beats gets a beat when it holds `cur` already, a
 * patch when it holds `prev`, else the whole one.
 */
export function nextMessage(peer: PeerHolds, prev: Announcement | undefined, cur: Announcement, heartbeat: boolean): "announce" | "patch" | "beat" | "nothing" {
  if (!peer.beats) return "announce";
  if (peer.ourSeq === cur.seq) return heartbeat ? "beat" : "nothing";
  if (prev !== undefined && peer.ourSeq === prev.seq && prev.instance === cur.instance && prev.seq < cur.seq) return "patch";
  return "announce";
}
