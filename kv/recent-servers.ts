/**
 * Which members served which model content, now or lately, as their announcements said: the only
 * members a node takes a conversation's KV from. A restored cache sits in a slot that later
 * conversations sharing its prefix may reuse, so its maker must be one this node's routing would
 * have trusted with those conversations anyway: a member that announces serving the model (the
 * routes send it prompts, and `--hosts` is the operator's say over both). "Lately", because the
 * usual holder is a replica just released or a model just evicted: it stopped serving a moment ago.
 * Without this, a member forwarding a request could name any node as the holder (`x-mesh-kv-from`),
 * itself included, and have KV of its own making restored here.
 */
import type { Announcement } from "../mesh/messages.ts";

/** How long after a member stops serving a model content its saved conversations of it are still taken. */
export const SERVED_LATELY_MS = 30 * 60_000;

/** The content identities an announcement serves now (pure): its serving names, through its disk entries. */
export function servedIdentities(a: Pick<Announcement, "serving" | "modelsOnDisk">): Set<string> {
  const serving = new Set(a.serving);
  return new Set(a.modelsOnDisk.flatMap((m) => (m.identity !== undefined && serving.has(m.name) ? [m.identity] : [])));
}

export class RecentServers {
  /** By member and content identity: until when it served it (Infinity: it does now). */
  private readonly until = new Map<string, Map<string, number>>();

  constructor(private readonly now: () => number = Date.now) {}

  /** The members as they are now (a member absent has left): what each serves, from its announcement. */
  heard(members: ReadonlyMap<string, Pick<Announcement, "serving" | "modelsOnDisk">>): void {
    const now = this.now();
    for (const [member, served] of this.until) {
      const announcement = members.get(member);
      const still = announcement ? servedIdentities(announcement) : new Set<string>();
      for (const [identity, until] of served) {
        if (until === Infinity && !still.has(identity)) served.set(identity, now);
        else if (until < now - SERVED_LATELY_MS) served.delete(identity);
      }
      if (served.size === 0) this.until.delete(member);
    }
    for (const [member, announcement] of members) {
      const ids = servedIdentities(announcement);
      if (ids.size === 0) continue;
      let served = this.until.get(member);
      if (!served) this.until.set(member, (served = new Map()));
      for (const identity of ids) served.set(identity, Infinity);
    }
  }

  /** Whether `member` serves content `identity`, or stopped within `SERVED_LATELY_MS`. */
  servedLately(member: string, identity: string): boolean {
    const until = this.until.get(member)?.get(identity);
    return until !== undefined && until >= this.now() - SERVED_LATELY_MS;
  }
}
