/**
 * Control messages between members, validated with zod where they arrive: unknown fields are
 * dropped, a message of the wrong shape is refused. Every message carries the protocol version.
 */
import { z } from "zod";
import { announcedCapabilities } from "../models/model-capabilities.ts";
import { modelRefOf } from "../models/model-ref.ts";
import { StatementSchema, TrustClaimSchema } from "./roster.ts";
import { TRANSPORT_LINES } from "./transport.ts";

export const PROTOCOL_VERSION = 1;

/**
 * What one announcement may carry. The schema refuses more on arrival and the sender trims to the
 * same figures before it sends (`mesh/announcement.ts`), so an honest node is never dropped as junk
 * and no member can make every peer's catalog huge.
 */
export const ANNOUNCEMENT_LIMITS = {
  /** Characters of a model name, of a source URL, and of a model reference (which may be a URL). */
  name: 256,
  source: 2048,
  ref: 2048,
  modelsOnDisk: 4096,
  seeds: 256,
  serving: 256,
  idle: 256,
  lastRequest: 256,
  addresses: 32,
  layout: 64,
  /** Models one node serves as replicas (it holds a few at most: see `MAX_REPLICAS_PER_NODE`). */
  replicating: 16,
  /** Characters of a failed load's error as announced. */
  error: 300,
  /** Characters of a model's family (its GGUF `general.architecture`: "llama", "qwen2", "nomic-bert"). */
  family: 64,
  /** A model's weights as announced: beyond any model there is (10^15). */
  parameters: 1e15,
  /** The models on disk and the seeds together, as JSON: at typical sizes about 800 models. */
  modelBytes: 128 * 1024,
  /** The whole announcement as JSON, leaving room under the control message cap for a hello's member list. */
  bytes: 160 * 1024,
} as const;
const L = ANNOUNCEMENT_LIMITS;

const ModelName = z.string().max(L.name);
const Source = z.string().url().max(L.source);
/**
 * A reference a model is pulled by. What a reference may look like grows from version to version
 * (a catalog id one node knows and another does not), so one this node cannot read, or one over
 * the limit, is dropped on its own: the model it names stays, and so does the peer.
 */
const Ref = z.string().max(L.ref).refine(isModelRef).optional().catch(undefined);
/** A family as GGUF architectures are named: letters, digits, `_`, `-`, `.`; nothing a client could read as markup or a new line. */
export const FAMILY = /^[A-Za-z0-9_.-]+$/;
export const ModelOnDiskSchema = z.object({
  name: ModelName,
  size: z.number().nonnegative(),
  need: z.number().nonnegative(),
  source: Source.optional(),
  ref: Ref,
  // Shown by consoles only: one a node cannot read is dropped on its own, never the model.
  type: z.string().max(32).optional().catch(undefined),
  quant: z.string().max(32).optional().catch(undefined),
  /** Its family and weights, for Ollama's details of a model on another node: display-only claims. */
  family: z.string().max(L.family).regex(FAMILY).optional().catch(undefined),
  parameters: z.number().int().min(0).max(L.parameters).optional().catch(undefined),
  /** Its content identity (`models/content-identity.ts`), once worked out: what a copy of it is checked against. */
  identity: z.string().regex(/^[0-9a-f]{64}$/).optional().catch(undefined),
  /** What it can be asked beyond text (`models/model-capabilities.ts`): names this node does not know are dropped. */
  caps: z.array(z.string().max(16)).max(8).transform(announcedCapabilities).optional().catch(undefined),
});
/**
 * How pressed one of this node's servers is: its slots, requests in flight, requests waiting for a
 * slot, and the longest recent wait for one (`pool/slot-queue.ts`). The demand signal replicas are
 * decided from; it changes with every request, so it rides on heartbeats, never prompts a send.
 */
export const DemandSchema = z.object({ model: ModelName, slots: z.number().int().min(0).max(4096), inFlight: z.number().int().min(0).max(1_000_000), queued: z.number().int().min(0).max(1_000_000), waitMs: z.number().min(0).max(86_400_000) });
export type ModelDemand = z.infer<typeof DemandSchema>;

/** A model this node can name but has no file of: by a source URL (its registry) or a reference (`--model REF`). */
export const SeedSchema = z.object({ name: ModelName, source: Source.optional(), ref: Ref });

export const MemberAddrSchema = z.object({
  nodeId: z.string().min(1).max(128),
  addresses: z.array(z.string().max(64)).max(L.addresses),
  relayUrl: z.string().max(256).optional(),
});

export const ROLES = ["host", "worker", "idle"] as const;
export type Role = (typeof ROLES)[number];

export const AnnouncementSchema = z.object({
  nodeId: z.string().min(1).max(128),
  addresses: z.array(z.string().max(64)).max(L.addresses),
  relayUrl: z.string().max(256).optional(),
  /** New on every start of the node, so peers tell a restart from a second connection. */
  instance: z.string().min(1).max(64),
  /** Increases with every change, so an older announcement never replaces a newer one. */
  seq: z.number().int().nonnegative(),
  role: z.enum(ROLES),
  vramBytes: z.number().nonnegative(),
  ramBytes: z.number().nonnegative(),
  /** Models whose files this node has, with what each needs to run (file + KV cache + margin). */
  modelsOnDisk: z.array(ModelOnDiskSchema).max(L.modelsOnDisk),
  /** Models this node knows only a source URL for (registry entries without a file): seeds of the catalog. */
  seeds: z.array(SeedSchema).max(L.seeds).default([]),
  /** Models whose llama-server on this node answers now. */
  serving: z.array(ModelName).max(L.serving),
  /** The model whose group this node is in. */
  assigned: ModelName.optional(),
  /** This node hosts that model (runs its llama-server), loaded or loading. */
  hosting: z.boolean().default(false),
  /** Models this node unloaded for lack of requests; nobody is assigned them until one comes. */
  idle: z.array(ModelName).max(L.idle).default([]),
  /** Whether it downloads models it is assigned (`--fetch off`: it lends compute only). */
  fetches: z.boolean().default(true),
  /** It keeps running layouts (see `splitPlan`); nodes of older versions elect afresh, so a group with one does too. */
  keepsLayouts: z.boolean().default(false),
  /** It never elects a member that can never get a model (no files, no fetching) as its host; older versions may, so a group with one does too. */
  hostsOnlyGetters: z.boolean().default(false),
  /** It elects, for a model some holder's copy reads images of, a holder whose copy does (its projector beside it) first; older versions do not, so a group with one does not either. */
  prefersSeeingHosts: z.boolean().default(false),
  /** It reads `beat`, `patch` and `want` (`mesh/announcement-delta.ts`); older versions read them as junk, so they get the whole announcement every heartbeat. */
  beats: z.boolean().default(false).catch(false),
  /** It beats only its ring neighbours and judges the others by QUIC's keep-alives (`mesh/watch-ring.ts`), and reads `lost`; only where its connections count datagrams (iroh 1.x). */
  ring: z.boolean().default(false).catch(false),
  /** The workers (node ids) its running server of the assigned model uses, when it hosts one. */
  layout: z.array(z.string().min(1).max(128)).max(L.layout).refine((ids) => new Set(ids).size === ids.length, "a worker named twice in layout").optional(),
  /** Its last load of the assigned model failed, and why (it tries again later, less and less often). */
  loadFailed: z
    .object({
      model: ModelName,
      // Shown to clients in error messages: one line of text.
      error: z.string().max(L.error).transform((e) => e.replace(/[\x00-\x1f\x7f]/g, " ")),
      // It becomes a Retry-After header: whole seconds, at most a day.
      retryInS: z.number().int().min(0).max(86_400),
    })
    .optional(),
  /** Models it serves (or loads) as replicas beside their hosts (`placement/replicas.ts`): not its group's, nor loaded on demand. A list a node cannot read is dropped on its own. */
  replicating: z.array(ModelName).max(L.replicating).default([]).catch([]),
  /** It may be given replicas (`--replicas on`); older versions say nothing and are given none. */
  takesReplicas: z.boolean().default(false).catch(false),
  /** Its servers' queues (`DemandSchema`). Junk from a peer is dropped on its own, never the peer. */
  demand: z.array(DemandSchema).max(L.serving).default([]).catch([]),
  /** A model file this node is fetching, and how far it got. */
  fetching: z.object({ model: ModelName, bytes: z.number().nonnegative(), total: z.number().nonnegative(), from: z.string().max(2048) }).optional(),
  apiPort: z.number().int().min(0).max(65535),
  /** Last request per model, ms since the epoch. */
  lastRequest: z.record(ModelName, z.number()).refine((r) => Object.keys(r).length <= L.lastRequest, `at most ${L.lastRequest} models in lastRequest`),
  meshVersion: z.string().max(64),
  /** The iroh line it runs; absent from nodes of the default line before iroh1 (and read as it). */
  transport: z.enum(TRANSPORT_LINES).optional().catch(undefined),
  /** When it started, ms since the epoch by its clock (consoles show uptime); older versions send none. */
  startedAt: z.number().int().nonnegative().optional().catch(undefined),
  llamaBuild: z.string().max(128),
  rpcProtocol: z.string().max(32),
  /**
   * The direct path (TLS), when this node offers one: its port and pinned certificate hash, for RPC
   * and model copies, with signed hellos (`tunnel/direct-auth.ts`). Nodes before signatures offered
   * theirs as `direct`: they and this one do not understand each other's hellos, so neither sees
   * the other's offer, and they keep to the mesh connection.
   */
  signedDirect: z.object({ port: z.number().int().min(1).max(65535), certSha256: z.string().regex(/^[0-9a-f]{64}$/) }).optional(),
  /**
   * Its standing under the mesh's roster (`roster.ts`): a vouch, or a pass bound to its id. A
   * claim each node checks against its own copy of the roster's key (`peer-standing.ts`); one of
   * the wrong shape reads as none. Nodes before rosters, and unanchored ones, show none.
   */
  trust: TrustClaimSchema.optional().catch(undefined),
});

export type Announcement = z.infer<typeof AnnouncementSchema>;

const v = z.literal(PROTOCOL_VERSION);
const Seq = z.number().int().nonnegative();

/** The fields a patch may set or take away: every field but who the node is and which announcement this is. */
export const PATCHABLE = AnnouncementSchema.keyof().options.filter((k) => k !== "nodeId" && k !== "instance" && k !== "seq");
const Patchable = z.enum(PATCHABLE as [string, ...string[]]);
/** Statements in one `roster` message: a few hundred bytes each, well under the control message cap. */
export const ROSTER_STATEMENTS_PER_MESSAGE = 256;

export const ControlMessageSchema = z.discriminatedUnion("type", [
  /** First message on a control stream after authentication: who I am and whom I know. */
  z.object({ v, type: z.literal("hello"), announcement: AnnouncementSchema, members: z.array(MemberAddrSchema).max(1024) }),
  /** My announcement changed, or the heartbeat is due. */
  z.object({ v, type: z.literal("announce"), announcement: AnnouncementSchema }),
  /**
   * I am here, and my announcement is still `seq` (a peer that has another asks for it whole with
   * `want`); my servers' queues ride along, as they change with every request. Sent each heartbeat
   * instead of the whole announcement, to peers that announce `beats`.
   */
  z.object({
    v,
    type: z.literal("beat"),
    seq: Seq,
    demand: z.array(DemandSchema).max(L.serving).optional().catch(undefined),
    /** You are my ring neighbour (or I was told you fell silent): watch me back (`mesh/watch-ring.ts`). To peers that announce `ring`. */
    watch: z.boolean().optional().catch(undefined),
  }),
  /** My announcement moved from `base` to `seq`: these fields are new (`set`) or gone (`unset`). To peers that announce `beats`. */
  z.object({ v, type: z.literal("patch"), base: Seq, seq: Seq, set: z.partialRecord(Patchable, z.unknown()), unset: z.array(Patchable).max(PATCHABLE.length).default([]) }),
  /** Your last beat or patch did not follow what I hold of you: send me your whole announcement. */
  z.object({ v, type: z.literal("want") }),
  /** Members I now know (sent when one joins me), so no pair that joined at once stays apart. */
  z.object({ v, type: z.literal("members"), members: z.array(MemberAddrSchema).max(1024) }),
  /** A member I watched fell silent and I dropped it: check it yourself (`mesh/watch-ring.ts`). To peers that announce `ring`. */
  z.object({ v, type: z.literal("lost"), member: z.string().min(1).max(128) }),
  /** I am shutting down: forget me now rather than at the timeout. */
  z.object({ v, type: z.literal("leave") }),
  /**
   * What the roster signed that I know (passes issued, revocations, closing): sent only to a peer
   * that shows the same roster (nodes before rosters would read an unknown message as junk).
   */
  z.object({ v, type: z.literal("roster"), statements: z.array(StatementSchema).max(ROSTER_STATEMENTS_PER_MESSAGE) }),
]);

export type ControlMessage = z.infer<typeof ControlMessageSchema>;

/** Whether `text` is a model reference this node can pull (`parseModelRef` reads it as one). */
export function isModelRef(text: string): boolean {
  return modelRefOf(text) !== undefined;
}
