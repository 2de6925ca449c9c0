/**
 * A node's part in moving conversations' KV caches over the mesh (`kv/`): `follow` fetches a moved
 * conversation's cache before this node's server reads its prompt, `holder` answers members' KV
 * streams from this node's saved slots. What the holder believes of the asker is what its
 * announcement says it serves; what it gives is only ever a saved slot of a model this node has.
 * The asker takes KV only from a member that serves the model, or did lately (`recent-servers.ts`).
 * Under a roster, KV moves only between nodes whose word counts: a guest's asks get a miss, and a
 * guest is never asked. A member's hint of where a conversation was (`x-mesh-kv-from`) is followed
 * only to one of the owner's machines or a node `--hosts` names; this node's own routing record,
 * to any server it sent the conversation to.
 */
import type { Announcement } from "../mesh/messages.ts";
import { KvFollow } from "../kv/kv-follow.ts";
import { KvHolder } from "../kv/kv-holder.ts";
import { kvShapeOf } from "../kv/kv-shape.ts";
import { RecentServers, servedIdentities } from "../kv/recent-servers.ts";
import type { Log } from "../base/log.ts";
import type { ModelInfo } from "../models/model-store.ts";
import type { SlotCache } from "../pool/slot-cache.ts";
import type { PathStream } from "./peer-streams.ts";


export interface KvSources {
  build: string | undefined;
  /** Disk for saved slots; 0: nothing is kept, fetched or given. */
  budgetBytes: number;
  slots: SlotCache;
  models: () => readonly ModelInfo[];
  identityOf: (m: ModelInfo) => string | undefined;
  /** A member's announcement, while it is one. */
  announcementOf: (member: string) => Pick<Announcement, "serving" | "modelsOnDisk"> | undefined;
  /** Whether a member's word counts here (`placement/trust.ts`): KV goes neither to nor from a guest. */
  counts: (member: string) => boolean;
  /** Whether a member is one of the owner's machines (checked under the roster; none without one). */
  vouched: (member: string) => boolean;
  /** A KV stream to a member, over the direct path where it has one (`peer-streams.ts`). */
  open: (member: string) => Promise<PathStream | undefined>;
  /** `--hosts`: the only nodes that serve this node's clients, and so the only ones whose KV it takes (none: any member). */
  hosts: readonly string[];
  log: Log;
}

export interface NodeKv {
  follow: KvFollow | undefined;
  holder: KvHolder;
  /** The members as they are now, with their announcements: who served what lately. */
  heard(members: ReadonlyMap<string, Pick<Announcement, "serving" | "modelsOnDisk">>): void;
}

/** Whether an announcement serves a model of content `identity` (pure). */
export function servesContent(a: Pick<Announcement, "serving" | "modelsOnDisk"> | undefined, identity: string): boolean {
  return a !== undefined && servedIdentities(a).has(identity);
}

export function nodeKv(s: KvSources): NodeKv {
  const recent = new RecentServers();
  const named = (member: string) => s.hosts.includes(member);
  const mayHold = (member: string, identity: string, routed: boolean) =>
    // This node's own routing record, the roster's word or the operator's; never a member's hint alone.
    (routed || s.vouched(member) || named(member)) &&
    (s.counts(member) || named(member)) &&
    (s.hosts.length === 0 || named(member)) &&
    (servesContent(s.announcementOf(member), identity) || recent.servedLately(member, identity));
  const follow = s.budgetBytes > 0 ? new KvFollow({ build: s.build, open: async (member) => (await s.open(member))?.stream, mayHold, keeps: s.vouched, slots: s.slots, maxBytes: s.budgetBytes, shapeOf: (identity) => kvShapeOf(s.models().find((m) => s.identityOf(m) === identity)?.facts), log: s.log }) : undefined;
  const holder = new KvHolder({
    build: s.budgetBytes > 0 ? s.build : undefined,
    savedOf: async (identity) => {
      if (!s.models().some((m) => s.identityOf(m) === identity)) return undefined;
      // Only what is saved already: a member's ask never makes this node save a conversation its server holds.
      // A server on its way out (a replica released, a model evicted) may be saving the very conversation asked for.
      await s.slots.whenSaved(identity);
      return s.slots.savedOf(identity);
    },
    intact: (path) => s.slots.intact(path),
    servesContent: (member, identity) => servesContent(s.announcementOf(member), identity),
    refuses: (member) => (s.counts(member) ? undefined : "a guest of this mesh gets no KV from the owner's machines"),
    prefillTps: (identity) => follow?.prefillTps(identity),
    log: s.log,
  });
  return { follow, holder, heard: (members) => recent.heard(members) };
}
