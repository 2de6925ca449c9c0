/**
 * What a node says about its models in its announcement, and how an announcement becomes the
 * catalog's view of a node: the models on disk and the seeds this node offers the mesh (each with
 * the reference and source peers may pull it by), and the same fields read back from any node.
 */
import { existsSync } from "node:fs";
import { announcedRef, describeLeftOut, fitModels } from "../mesh/announcement.ts";
import type { NodeModel, NodeView } from "../placement/catalog.ts";
import { ANNOUNCEMENT_LIMITS, FAMILY, type Announcement } from "../mesh/messages.ts";
import type { Log } from "../base/log.ts";
import { hasCredentials } from "../models/download-rules.ts";
import type { ModelIdentities } from "../models/model-identities.ts";
import { capabilitiesOfModel, type Capability } from "../models/model-capabilities.ts";
import { needOf } from "../models/model-need.ts";
import type { ModelInfo, ModelStore } from "../models/model-store.ts";

export type ModelFields = Pick<Announcement, "modelsOnDisk" | "seeds" | "serving" | "assigned" | "hosting" | "idle" | "fetches" | "fetching" | "rpcProtocol" | "keepsLayouts" | "hostsOnlyGetters" | "prefersSeeingHosts" | "layout" | "loadFailed" | "replicating" | "takesReplicas">;

/** Its family and weights as peers accept them (Ollama's details elsewhere in the mesh); what they would drop is left off. */
function familyAndWeights(m: ModelInfo): { family?: string; parameters?: number } {
  const family = m.facts?.architecture;
  const p = m.parameters;
  return {
    ...(family !== undefined && family.length <= ANNOUNCEMENT_LIMITS.family && FAMILY.test(family) ? { family } : {}),
    ...(p !== undefined && Number.isSafeInteger(p) && p >= 0 && p <= ANNOUNCEMENT_LIMITS.parameters ? { parameters: p } : {}),
  };
}

/** What a chat model can be asked beyond text, none included: a peer tells "none" from a node too old to say. */
const capsOf = (m: ModelInfo): { caps?: Capability[] } => (m.type === "llm" ? { caps: capabilitiesOfModel(m) } : {});

/** What running a model of this node needs, its own context size or else `defaultCtxSize` (`--ctx-size`). */
export const needAt =
  (defaultCtxSize: number) =>
  (m: ModelInfo): number =>
    needOf(m.sizeBytes, m.facts, m.ctxSize ?? defaultCtxSize);

/** Every file of the model is here and whole, as far as a stat can tell. */
export const hasFiles = (m: ModelInfo) => !m.problem && m.files.every((f) => existsSync(f));

/**
 * The models on disk and the seeds, untrimmed: `refs` are the models named by a reference with
 * `--model REF` (name → reference), announced even before they are here so the mesh learns where
 * to get them.
 */
export function diskFields(
  list: readonly ModelInfo[],
  refs: ReadonlyMap<string, string>,
  needOf: (m: ModelInfo) => number,
  identityOf: (m: ModelInfo) => string | undefined = () => undefined,
): Pick<ModelFields, "modelsOnDisk" | "seeds"> {
  const ref = (name: string, own: string | undefined) => {
    const r = own ?? refs.get(name);
    const announced = r === undefined ? undefined : announcedRef(r);
    return announced ? { ref: announced } : {};
  };
  // A source with a user name or password in it is the operator's secret: peers get none (they could not use it anyway).
  const source = (m: ModelInfo) => (m.source && !hasCredentials(m.source) ? { source: m.source } : {});
  const onDisk = list.filter(hasFiles);
  const seeds = list.filter((m) => !hasFiles(m) && (source(m).source || m.ref));
  const named = new Set([...onDisk, ...seeds].map((m) => m.name));
  return {
    modelsOnDisk: onDisk.map((m) => {
      const identity = identityOf(m);
      return { name: m.name, size: m.sizeBytes, need: needOf(m), ...source(m), ...ref(m.name, m.ref), type: m.type, ...(m.quant ? { quant: m.quant } : {}), ...familyAndWeights(m), ...(identity ? { identity } : {}), ...capsOf(m) };
    }),
    seeds: [
      ...seeds.map((m) => ({ name: m.name, ...source(m), ...ref(m.name, m.ref) })),
      ...[...refs.keys()].filter((name) => !named.has(name)).map((name) => ({ name, ...ref(name, undefined) })),
    ],
  };
}

/**
 * The models on disk and the seeds as announced: trimmed to what peers accept (said once per change
 * when that leaves some out), worked out again only when the store's list or the models to keep change.
 */
export class AnnouncedDisk {
  /** Moves whenever the fields do. */
  version = 0;
  private cache: { list: readonly ModelInfo[]; keep: string; identities: number; fields: Pick<ModelFields, "modelsOnDisk" | "seeds"> } | undefined;
  private leftOut: string | undefined;

  constructor(
    private readonly o: () => { store: Pick<ModelStore, "list">; refs: ReadonlyMap<string, string>; log: Log },
    private readonly needOf: (m: ModelInfo) => number,
    private readonly identities?: Pick<ModelIdentities, "of" | "version">,
  ) {}

  /** The fields, keeping the models named in `keep` above the others when the budget cuts. */
  fields(keep: readonly string[]): Pick<ModelFields, "modelsOnDisk" | "seeds"> {
    const { store, refs, log } = this.o();
    const list = store.list();
    const keepKey = keep.join("\n");
    const identities = this.identities?.version ?? 0;
    if (this.cache?.list !== list || this.cache.keep !== keepKey || this.cache.identities !== identities) {
      const all = diskFields(list, refs, this.needOf, (m) => this.identities?.of(m));
      const { lists, left } = fitModels(all, new Set(keep), ANNOUNCEMENT_LIMITS.modelBytes);
      const leftOut = describeLeftOut(left, { modelsOnDisk: all.modelsOnDisk.length, seeds: all.seeds.length });
      if (leftOut && leftOut !== this.leftOut) log.warn(leftOut);
      this.leftOut = leftOut;
      this.cache = { list, keep: keepKey, identities, fields: lists };
      this.version++;
    }
    return this.cache.fields;
  }
}

/** The catalog's view of a node from what it announced (ours included). */
export function nodeView(nodeId: string, vramBytes: number, a: ModelFields): NodeView {
  const described = (x: { source?: string; ref?: string }) => ({ ...(x.source ? { source: x.source } : {}), ...(x.ref ? { ref: x.ref } : {}) });
  return {
    nodeId,
    vramBytes,
    modelsOnDisk: a.modelsOnDisk.map(
      (m): NodeModel => ({
        name: m.name,
        sizeBytes: m.size,
        needBytes: m.need,
        ...described(m),
        ...(m.identity ? { identity: m.identity } : {}),
        ...(m.family ? { family: m.family } : {}),
        ...(m.parameters !== undefined ? { parameters: m.parameters } : {}),
        ...(m.quant ? { quant: m.quant } : {}),
        ...(m.type ? { type: m.type } : {}),
        ...(m.caps ? { caps: m.caps } : {}),
      }),
    ),
    assigned: a.assigned,
    ready: a.serving,
    hosting: a.hosting,
    idle: a.idle,
    fetches: a.fetches,
    rpcProtocol: a.rpcProtocol,
    ...(a.fetching ? { fetching: a.fetching.model } : {}),
    keepsLayouts: a.keepsLayouts,
    hostsOnlyGetters: a.hostsOnlyGetters,
    prefersSeeingHosts: a.prefersSeeingHosts,
    ...(a.layout ? { layout: a.layout } : {}),
    ...(a.loadFailed ? { loadFailed: a.loadFailed } : {}),
    ...(a.replicating?.length ? { replicating: a.replicating } : {}),
    ...(a.takesReplicas ? { takesReplicas: true } : {}),
    // A seed left with nothing to get it from (its reference dropped as unreadable) names nothing.
    seeds: a.seeds.filter((x) => x.source || x.ref).map((x): NodeModel => ({ name: x.name, sizeBytes: 0, needBytes: 0, ...described(x) })),
  };
}
