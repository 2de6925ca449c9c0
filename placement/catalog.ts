/**
 * The mesh's catalog of models, derived by every node from the same announcements (pure), with no
 * central authority: for each model its size and memory need, the nodes that have it on disk, the
 * nodes assigned to serve it (its group), the group's elected host, its status, and which member
 * downloads it when no node has it yet.
 */
import { elect, splitPlan, type Candidate } from "./election.ts";

export interface NodeModel {
  name: string;
  sizeBytes: number;
  /** File size plus KV cache for its context, with a margin (see `modelNeedBytes`). */
  needBytes: number;
  /** Where to download it when nobody has it (e.g. a Hugging Face resolve URL). */
  source?: string;
  /** The reference it is pulled by (`org/repo:Q4_K_M`, a URL), when it came from one. */
  ref?: string;
  /** Its content identity as this node announced it (`models/content-identity.ts`): a claim, checked by a copy. */
  identity?: string;
  /** What this node says the model is (GGUF architecture, weights, quant): display-only claims. */
  family?: string;
  parameters?: number;
  quant?: string;
  /** Its kind as this node says (`models/model-type.ts`: llm, embedding...): a claim. */
  type?: string;
  /** What this node says it can be asked beyond text (`models/model-capabilities.ts`: tools, vision): a claim. */
  caps?: string[];
}

/** What the catalog needs to know about one node (ours included), from its announcement. */
export interface NodeView {
  nodeId: string;
  /** Memory it offers for models: VRAM, or RAM on a CPU node. */
  vramBytes: number;
  modelsOnDisk: NodeModel[];
  /** The model this node serves (its group), if assigned. */
  assigned: string | undefined;
  /** Models this node's API answers for right now (its llama-server is up). */
  ready: string[];
  /** Models it unloaded for lack of requests: nobody is assigned them again until one comes. */
  idle: string[];
  /** It hosts its assigned model (has decided to run llama-server for it). */
  hosting?: boolean;
  /** It downloads models it is assigned (false: it lends compute only). Default true. */
  fetches?: boolean;
  /** Models it knows only by a source URL (its registry), seeding the catalog. */
  seeds?: NodeModel[];
  /** Its RPC protocol version: only nodes of the host's major version can be in its split. */
  rpcProtocol?: string;
  /** The model whose files it is getting now (its announced fetch progress). */
  fetching?: string;
  /** It keeps running layouts (false: an older version, which elects afresh). */
  keepsLayouts?: boolean;
  /** It never elects a member that can never get the model (false: an older version, which may). */
  hostsOnlyGetters?: boolean;
  /** It elects a holder whose copy reads images first, for a model some copy of which does (false: an older version, which does not). */
  prefersSeeingHosts?: boolean;
  /** The workers its running server of its assigned model uses, when it hosts one. */
  layout?: string[];
  /** Its last load of its assigned model failed: why, and when it tries again. */
  loadFailed?: { model: string; error: string; retryInS: number };
  /** Models it loads or serves as a replica (`placement/replicas.ts`): never its host's, nor its group's. */
  replicating?: string[];
  /** It may be given replicas (`--replicas on`); older versions and `off` are not. */
  takesReplicas?: boolean;
}

export type ModelStatus = "unloaded" | "loading" | "ready" | "needs-capacity" | "failed";

export interface CatalogModel {
  name: string;
  source: string | undefined;
  /** The reference it is pulled by, as some node announced it. */
  ref?: string;
  /** The member that downloads it for the group when no node has its files (see `puller`). */
  puller?: string;
  sizeBytes: number;
  needBytes: number;
  nodesOnDisk: string[];
  /**
   * The content the mesh knows the model by: the one identity its holders announce. None while none
   * has announced one, or when holders announce different ones (`contested`): then no copy is taken.
   */
  identity?: string;
  /** Its holders that announce `identity`: the only nodes a copy of it is taken from. */
  copyFrom: string[];
  /** Holders announce different contents under its name. */
  contested?: true;
  /** The group: nodes assigned to this model. */
  nodesServing: string[];
  /** Sum of the group's memory. */
  capacityBytes: number;
  host: string | undefined;
  /** The node whose server for it answers requests now: the host, or one still serving while the host loads. */
  servedBy: string | undefined;
  /** Every node whose server for it answers now (`servedBy` first, then by id): its host and its replicas, where requests may go, replicas even while its own servers are down. */
  servers: string[];
  /** The host cannot hold it alone: it runs split over the group, so another node adds capacity. */
  split: boolean;
  /** Let go for lack of requests and served by nobody: not to be assigned until one comes (its group disbands). */
  idle: boolean;
  status: ModelStatus;
  /** Why its host's last load failed (status `failed`), and in how many seconds it tries again. */
  failure?: { error: string; retryInS: number };
  /**
   * What it is (family, weights, quant) as one holder says (`describer`): shown to clients (Ollama's
   * details), never used to decide anything (its kind below is).
   */
  family?: string;
  parameters?: number;
  quant?: string;
  /**
   * Its kind (`models/model-type.ts`) when every holder says the same: what a request it cannot
   * serve is told (an embedding asked of a chat model), and which models to ask instead.
   */
  type?: string;
  /** What it can be asked beyond text (images, tools) when every holder says the same; unknown otherwise. */
  caps?: string[];
}

/** A model's group as election sees it. */
export function electionCandidates(nodes: readonly NodeView[], model: string): Candidate[] {
  // A model some holder's copy reads images of: a copy without its projector would serve it blind.
  const seen = nodes.some((n) => n.modelsOnDisk.some((d) => d.name === model && d.caps?.includes("vision")));
  return nodes
    .filter((n) => n.assigned === model)
    .map((n) => ({
      nodeId: n.nodeId,
      vramBytes: n.vramBytes,
      // A replica answers, but as a replica: election ranks the group's own servers only.
      ready: n.ready.includes(model) && !n.replicating?.includes(model),
      hosting: n.hosting === true,
      // Only a node with the files can run llama-server for it; one still fetching hosts once it has them.
      canHost: n.modelsOnDisk.some((d) => d.name === model),
      canGet: n.fetches !== false || n.modelsOnDisk.some((d) => d.name === model),
      ...(n.hostsOnlyGetters === false ? { hostsOnlyGetters: false } : {}),
      ...(seen ? { seesImages: n.modelsOnDisk.some((d) => d.name === model && d.caps?.includes("vision") === true) } : {}),
      ...(n.prefersSeeingHosts === false ? { prefersSeeingHosts: false } : {}),
      ...(n.layout ? { layout: n.layout } : {}),
      ...(n.keepsLayouts === false ? { keepsLayouts: false } : {}),
    }));
}

const major = (v: string | undefined) => v?.split(".")[0];

/**
 * The members that can take part in the model's split: the elected host and those whose RPC
 * protocol shares its major version (7 and 8 do not talk). Every node works out the same set.
 */
export function splitCandidates(nodes: readonly NodeView[], model: string): Candidate[] {
  const candidates = electionCandidates(nodes, model);
  const host = nodes.find((n) => n.nodeId === elect(candidates));
  if (!host) return [];
  return candidates.filter((c) => major(nodes.find((n) => n.nodeId === c.nodeId)?.rpcProtocol) === major(host.rpcProtocol));
}

/**
 * Which member of a model's group downloads it from its reference or source when no node has its
 * files (pure; every node works out the same one): the others wait and copy it from that member
 * over the mesh, so the mesh downloads it once. Only members that fetch models take part. One that
 * announces it is fetching the model keeps the job, so a bigger newcomer does not start a second
 * download; otherwise (and among several fetching) the one election ranks first: most memory, then
 * the larger id, which is the node likely to host it and so needs the file first. A member that
 * has the files but has not announced their content identity yet pulled them: it keeps the job. A puller that
 * leaves, or gives up (it leaves the group), is no longer a member, and the next one takes over.
 */
export function puller(group: readonly NodeView[], model: string): string | undefined {
  const members = group.filter((n) => n.assigned === model && n.fetches !== false);
  // One that has it already (its content identity still being worked out) pulled it: the others wait for it.
  const holding = members.filter((n) => n.modelsOnDisk.some((d) => d.name === model));
  const fetching = members.filter((n) => n.fetching === model);
  return elect((holding.length ? holding : fetching.length ? fetching : members).map((n) => ({ nodeId: n.nodeId, vramBytes: n.vramBytes })));
}

/** Who has, serves and idles each model: one pass over every view, so the catalog costs what the views hold. */
function indexViews(nodes: readonly NodeView[]) {
  const onDisk = new Map<string, string[]>();
  const entries = new Map<string, Map<string, NodeModel>>();
  const identities = new Map<string, Map<string, string[]>>();
  const readyOn = new Map<string, string[]>();
  const replicaOn = new Map<string, string[]>();
  const groups = new Map<string, NodeView[]>();
  const idle = new Set<string>();
  const add = <T>(map: Map<string, T[]>, key: string, value: T) => {
    const list = map.get(key);
    if (list) list.push(value);
    else map.set(key, [value]);
  };
  for (const n of nodes) {
    // A node that lists a model twice is one node that has it.
    for (const name of new Set(n.modelsOnDisk.map((d) => d.name))) add(onDisk, name, n.nodeId);
    for (const d of n.modelsOnDisk) {
      const byNode = entries.get(d.name) ?? entries.set(d.name, new Map()).get(d.name)!;
      if (!byNode.has(n.nodeId)) byNode.set(n.nodeId, d);
    }
    for (const d of n.modelsOnDisk) {
      if (d.identity === undefined) continue;
      const byIdentity = identities.get(d.name) ?? identities.set(d.name, new Map()).get(d.name)!;
      add(byIdentity, d.identity, n.nodeId);
    }
    for (const name of new Set(n.ready)) add(readyOn, name, n.nodeId);
    for (const name of new Set(n.replicating ?? [])) add(replicaOn, name, n.nodeId);
    for (const name of n.idle) idle.add(name);
    if (n.assigned !== undefined) add(groups, n.assigned, n);
  }
  return { onDisk, entries, identities, readyOn, replicaOn, groups, idle };
}

/**
 * The catalog from every node's view, including the models nodes know only by a source URL (their
 * registry; possibly on nobody's disk yet). Sorted by name, so every node lists it alike.
 */
export function catalog(nodes: readonly NodeView[]): CatalogModel[] {
  // Nodes may see a model's need differently (their own --ctx-size): every node takes the largest,
  // so all of them plan alike.
  const models = new Map<string, NodeModel>();
  // Nodes may name a model by different references. Every node takes the same one, whatever order
  // it hears them in: one a node with the files gives (the exact files the mesh has), the least first.
  const refFromDisk = new Set<string>();
  const merge = (m: NodeModel, onDisk = false) => {
    const known = models.get(m.name);
    const outranks = m.ref !== undefined && (known?.ref === undefined || (onDisk && !refFromDisk.has(m.name)) || (onDisk === refFromDisk.has(m.name) && m.ref < known.ref));
    const ref = outranks ? m.ref : known?.ref;
    if (outranks && onDisk) refFromDisk.add(m.name);
    models.set(m.name, {
      name: m.name,
      sizeBytes: Math.max(known?.sizeBytes ?? 0, m.sizeBytes),
      needBytes: Math.max(known?.needBytes ?? 0, m.needBytes),
      ...((known?.source ?? m.source) ? { source: known?.source ?? m.source } : {}),
      ...(ref !== undefined ? { ref } : {}),
    });
  };
  for (const n of nodes) for (const m of n.seeds ?? []) merge(m);
  for (const n of nodes) for (const m of n.modelsOnDisk) merge(m, true);
  for (const n of nodes) if (n.assigned && !models.has(n.assigned)) merge({ name: n.assigned, sizeBytes: 0, needBytes: 0 });
  const index = indexViews(nodes);

  return [...models.values()]
    .map((m): CatalogModel => {
      const group = index.groups.get(m.name) ?? [];
      // Only a group's members can be candidates: a model nobody is assigned has none.
      const candidates = group.length ? splitCandidates(nodes, m.name) : [];
      const capacityBytes = candidates.reduce((s, n) => s + n.vramBytes, 0);
      const readyOn = [...(index.readyOn.get(m.name) ?? [])].sort(byCodePoint);
      // Replicas serve beside the model's own servers and say nothing of its host or status (`placement/replicas.ts`).
      const replicas = index.replicaOn.get(m.name) ?? [];
      const ownReadyOn = readyOn.filter((id) => !replicas.includes(id));
      // A model nobody is assigned can still be up on a node that loaded it on demand.
      const host = splitPlan(candidates, m.needBytes)?.host ?? ownReadyOn[0];
      const hostNode = group.find((n) => n.nodeId === host);
      // Requests go to the host once it answers; until then (a newly elected host loading) to a
      // group member, or any node, whose server for it still answers.
      const servedBy = host && ownReadyOn.includes(host) ? host : (ownReadyOn.find((id) => group.some((n) => n.nodeId === id)) ?? ownReadyOn[0]);
      const failure = hostNode?.loadFailed?.model === m.name ? hostNode.loadFailed : undefined;
      // A group none of whose members can get the files has no host, whatever its memory: it needs a node that can.
      const status: ModelStatus = servedBy
        ? "ready"
        : group.length === 0
          ? "unloaded"
          : host === undefined || capacityBytes < m.needBytes
            ? "needs-capacity"
            : failure
              ? "failed"
              : "loading";
      const nodesOnDisk = [...(index.onDisk.get(m.name) ?? [])].sort(byCodePoint);
      const content = [...(index.identities.get(m.name) ?? new Map<string, string[]>())];
      const identity = content.length === 1 ? content[0]! : undefined;
      // Only a model no holder of its agreed content offers needs pulling from the world, and only
      // one it can be pulled from; under two contents, nobody's pull is waited for.
      const copyFrom = identity ? [...new Set(identity[1])].sort(byCodePoint) : [];
      // A holder still hashing what it has is waited for: one in the group keeps the pull (below),
      // one outside it pulls nothing, and nobody downloads a second copy meanwhile.
      const holderWaitedFor = nodesOnDisk.length > 0 && !group.some((n) => n.modelsOnDisk.some((d) => d.name === m.name));
      // Told as one holder tells it, the same one on every node: one with the agreed content first.
      const describer = index.entries.get(m.name)?.get(copyFrom[0] ?? nodesOnDisk[0] ?? "");
      // Its kind decides what a request is told (an embedding of a chat model), so it is one only
      // when every holder says the same: one member's word cannot turn a model's requests away.
      const types = new Set([...(index.entries.get(m.name)?.values() ?? [])].map((d) => d.type));
      const agreedType = types.size === 1 ? [...types][0] : undefined;
      // Alike, what it can be asked: a client is told it cannot send a model images only when every holder says so.
      const holders = [...(index.entries.get(m.name)?.values() ?? [])];
      const agreedCaps = new Set(holders.map((d) => d.caps?.join(","))).size === 1 ? holders[0]?.caps : undefined;
      const pulledBy = copyFrom.length === 0 && content.length <= 1 && !holderWaitedFor && (m.ref !== undefined || m.source !== undefined) ? puller(group, m.name) : undefined;
      return {
        name: m.name,
        source: m.source,
        ...(m.ref !== undefined ? { ref: m.ref } : {}),
        ...(pulledBy !== undefined ? { puller: pulledBy } : {}),
        sizeBytes: m.sizeBytes,
        needBytes: m.needBytes,
        nodesOnDisk,
        ...(identity ? { identity: identity[0] } : {}),
        copyFrom,
        ...(content.length > 1 ? { contested: true as const } : {}),
        nodesServing: group.map((n) => n.nodeId).sort(byCodePoint),
        capacityBytes,
        host,
        servedBy,
        // With its own servers down (a host reloading or gone), its replicas still answer.
        servers: servedBy === undefined ? readyOn : [servedBy, ...readyOn.filter((id) => id !== servedBy)],
        split: hostNode !== undefined && hostNode.vramBytes < m.needBytes,
        idle: ownReadyOn.length === 0 && index.idle.has(m.name),
        status,
        ...(status === "failed" && failure ? { failure: { error: failure.error, retryInS: failure.retryInS } } : {}),
        ...(describer?.family !== undefined ? { family: describer.family } : {}),
        ...(describer?.parameters !== undefined ? { parameters: describer.parameters } : {}),
        ...(describer?.quant !== undefined ? { quant: describer.quant } : {}),
        ...(agreedType !== undefined ? { type: agreedType } : {}),
        ...(agreedCaps !== undefined ? { caps: agreedCaps } : {}),
      };
    })
    .sort((a, b) => byCodePoint(a.name, b.name));
}

/** Locale-free order, so every node sorts alike. */
export const byCodePoint = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
