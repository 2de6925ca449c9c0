/**
 * This node's announcement: what it tells every peer about itself. The content is derived from the
 * node's state when asked; `seq` moves only when the content changed, so peers can tell a newer
 * announcement from an older one and a heartbeat repeats the same one.
 *
 * Peers refuse an announcement over the limits of `messages.ts` (and drop its sender as junk), so
 * the sender trims to the same limits first (`fitModels`, `fitAnnouncement`): entries the schema
 * would refuse are left out, lists are cut to their counts, and models past the byte budget go,
 * seeds first, never the ones this node serves or is assigned while others can go instead. A
 * model's reference (`announcedRef`) that peers would drop is left off, the model kept.
 */
import { randomUUID } from "node:crypto";
import { hasCredentials } from "../models/download-rules.ts";
import { exactRef, modelRefOf } from "../models/model-ref.ts";
import { ANNOUNCEMENT_LIMITS as L, isModelRef, ModelOnDiskSchema, SeedSchema, type Announcement, type ModelDemand } from "./messages.ts";

export type AnnouncementContent = Omit<Announcement, "seq" | "instance">;
export type ModelLists = Pick<Announcement, "modelsOnDisk" | "seeds">;

/** What trimming left out, by list. */
export interface LeftOut {
  /** Names of entries the schema would refuse (a name or source too long, a source that is no URL). */
  invalid: string[];
  modelsOnDisk: number;
  seeds: number;
}

const jsonBytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v));

/**
 * The reference to announce for a model named by `text` (pure), or undefined when it is none peers
 * could use: its exact form (`org/repo:Q8_0`, `org/repo/file.gguf`, a URL), so that nodes whose
 * catalogs of well-known ids differ, or that were given another spelling, all read the same one.
 */
export function announcedRef(text: string): string | undefined {
  const ref = modelRefOf(text);
  if (!ref) return undefined;
  // A user name or password in a URL is the operator's secret, and no peer may use it (PEER_SOURCE_RULE).
  if (ref.kind === "url" && hasCredentials(ref.url)) return undefined;
  const exact = exactRef(ref);
  return refFits(exact) ? exact : undefined;
}

/** Whether peers keep this reference: within the limit, and one they can read. */
const refFits = (ref: string) => ref.length <= L.ref && isModelRef(ref);

/** The entry without a reference peers would drop; a seed left with neither a reference nor a source names nothing to get. */
function withUsableRef<T extends { ref?: string | undefined }>(entry: T): T {
  if (entry.ref === undefined || refFits(entry.ref)) return entry;
  const { ref: _dropped, ...rest } = entry;
  return rest as T;
}
const seedOk = (e: ModelLists["seeds"][number]) => SeedSchema.safeParse(e).success && (e.source !== undefined || e.ref !== undefined);
const modelOk = (e: ModelLists["modelsOnDisk"][number]) => ModelOnDiskSchema.safeParse(e).success;

/**
 * The models on disk and seeds cut to what peers accept within `budgetBytes` of JSON (pure): models
 * named in `keep` are the last to be cut, and what stays keeps the order given.
 */
export function fitModels(lists: ModelLists, keep: ReadonlySet<string>, budgetBytes: number): { lists: ModelLists; left: LeftOut } {
  const invalid: string[] = [];
  const valid = <T extends { name: string }>(entries: readonly T[], ok: (e: T) => boolean) =>
    entries.filter((e) => ok(e) || (invalid.push(e.name.slice(0, 80)), false));
  const models = valid(lists.modelsOnDisk.map(withUsableRef), modelOk);
  const seeds = valid(lists.seeds.map(withUsableRef), seedOk);
  // Kept ones first, so cutting from the end takes the others.
  const byKeep = [...models.filter((m) => keep.has(m.name)), ...models.filter((m) => !keep.has(m.name))].slice(0, L.modelsOnDisk);
  const seedsIn = seeds.slice(0, L.seeds);
  const modelSizes = byKeep.map((m) => jsonBytes(m) + 1);
  const seedSizes = seedsIn.map((m) => jsonBytes(m) + 1);
  let total = jsonBytes({ modelsOnDisk: [], seeds: [] }) + modelSizes.reduce((a, b) => a + b, 0) + seedSizes.reduce((a, b) => a + b, 0);
  let seedCount = seedsIn.length;
  let modelCount = byKeep.length;
  while (total > budgetBytes && seedCount > 0) total -= seedSizes[--seedCount]!;
  while (total > budgetBytes && modelCount > 0) total -= modelSizes[--modelCount]!;
  const stays = new Set(byKeep.slice(0, modelCount));
  const out = { modelsOnDisk: models.filter((m) => stays.has(m)), seeds: seedsIn.slice(0, seedCount) };
  checked.add(out.modelsOnDisk);
  checked.add(out.seeds);
  return {
    lists: out,
    left: { invalid, modelsOnDisk: models.length - out.modelsOnDisk.length, seeds: seeds.length - out.seeds.length },
  };
}

/**
 * A node's queue figures as peers accept them (pure): models with names within the limit, at most
 * as many as it may serve, each figure a whole number in its range.
 */
export function announcedDemand(figures: readonly ModelDemand[]): ModelDemand[] {
  const whole = (n: number, max: number) => Math.min(max, Math.max(0, Math.round(Number.isFinite(n) ? n : 0)));
  return figures
    .filter((f) => f.model.length <= L.name)
    .slice(0, L.serving)
    .map((f) => ({ model: f.model, slots: whole(f.slots, 4096), inFlight: whole(f.inFlight, 1_000_000), queued: whole(f.queued, 1_000_000), waitMs: whole(f.waitMs, 86_400_000) }));
}

/** One line on what was left out, or undefined when nothing was. */
export function describeLeftOut(left: LeftOut, of: { modelsOnDisk: number; seeds: number }): string | undefined {
  const parts: string[] = [];
  if (left.modelsOnDisk) parts.push(`${left.modelsOnDisk} of ${of.modelsOnDisk} models on disk`);
  if (left.seeds) parts.push(`${left.seeds} of ${of.seeds} registry seeds`);
  if (left.invalid.length) parts.push(`${left.invalid.length} peers would refuse (a name over ${L.name} characters, or a source that is not a URL of at most ${L.source}): ${left.invalid.slice(0, 5).join(", ")}`);
  if (!parts.length) return undefined;
  return `the announcement leaves out ${parts.join("; ")}. It carries at most ${L.modelsOnDisk} models, ${L.seeds} seeds and ${L.modelBytes / 1024} KiB of them; peers do not see the rest`;
}

/**
 * The whole announcement within every limit peers check (pure): lists cut to their counts, and
 * models and seeds cut to what the byte budget leaves, keeping those served or assigned. This is
 * the last guard before the wire; when nothing is over it costs one serialization.
 */
export function fitAnnouncement(content: AnnouncementContent): AnnouncementContent {
  if (withinCounts(content) && listsValid(content) && jsonBytes(content) <= L.bytes) return content;
  const short = (names: readonly string[], max: number) => names.filter((n) => n.length <= L.name).slice(0, max);
  const lastRequest = Object.fromEntries(Object.entries(content.lastRequest).filter(([k]) => k.length <= L.name).slice(0, L.lastRequest));
  const rest = {
    ...content,
    addresses: content.addresses.slice(0, L.addresses),
    serving: short(content.serving, L.serving),
    idle: short(content.idle, L.idle),
    lastRequest,
    modelsOnDisk: [],
    seeds: [],
  };
  const keep = new Set([...rest.serving, ...(content.assigned ? [content.assigned] : [])]);
  const { lists } = fitModels(content, keep, L.bytes - jsonBytes(rest));
  return { ...rest, ...lists };
}

/** Model lists already checked entry by entry: the node hands out the same arrays until its models change. */
const checked = new WeakSet<object>();

function listsValid(c: ModelLists): boolean {
  const valid = <T extends { ref?: string | undefined }>(list: readonly T[], ok: (e: T) => boolean) => {
    if (checked.has(list)) return true;
    if (!list.every((e) => ok(e) && (e.ref === undefined || refFits(e.ref)))) return false;
    checked.add(list);
    return true;
  };
  return valid(c.modelsOnDisk, modelOk) && valid(c.seeds, seedOk);
}

function withinCounts(c: AnnouncementContent): boolean {
  const names = (list: readonly string[], max: number) => list.length <= max && list.every((n) => n.length <= L.name);
  return (
    c.addresses.length <= L.addresses &&
    c.modelsOnDisk.length <= L.modelsOnDisk &&
    c.seeds.length <= L.seeds &&
    names(c.serving, L.serving) &&
    names(c.idle, L.idle) &&
    names(Object.keys(c.lastRequest), L.lastRequest)
  );
}

export class AnnouncementSource {
  private seq = 0;
  private last: string | undefined;
  readonly instance = randomUUID();

  constructor(private readonly content: () => AnnouncementContent) {}

  /**
   * The current announcement; `changed` says whether it differs from the last one handed out. The
   * demand is left out of that: it moves with every request, and heartbeats carry it soon enough.
   */
  current(): { announcement: Announcement; changed: boolean } {
    const content = fitAnnouncement(this.content());
    const key = JSON.stringify({ ...content, demand: undefined });
    const changed = key !== this.last;
    if (changed) {
      this.last = key;
      this.seq++;
    }
    return { announcement: { ...content, instance: this.instance, seq: this.seq }, changed };
  }
}
