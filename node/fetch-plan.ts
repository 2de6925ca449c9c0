/**
 * How a node gets a model's files next (pure): from a peer that holds the content the mesh agrees
 * on, by a download this node makes itself (its operator's reference or source first, else the one
 * the mesh announced), or by waiting for the member that pulls it. `model-fetcher.ts` acts on it;
 * `copy-or-download.ts` weighs a peer copy against the download.
 */
import type { CatalogModel } from "../placement/catalog.ts";
import { withoutCredentials } from "../models/download-rules.ts";
import { modelRefOf } from "../models/model-ref.ts";
import { shortId } from "../base/short-id.ts";

/** How this node gets a model's files next (see `fetchPlan`). */
export type FetchPlan =
  | { kind: "peer"; peer: string }
  /** `pullModel` by a reference: the operator's, or (fromPeer) a Hugging Face one a peer announced. */
  | { kind: "pull"; ref: string; fromPeer: boolean }
  /** One file from a URL: the operator's source, or (fromPeer) a URL a peer announced as reference or source. */
  | { kind: "url"; url: string; fromPeer: boolean }
  | { kind: "wait"; why: string };

/** A download this node makes itself, from outside the mesh (a hub, a URL). */
export type DownloadPlan = Extract<FetchPlan, { kind: "pull" | "url" }>;

/** What this node's own operator says about a model (its registry, `--model REF`): trusted as such. */
export interface OwnOrigin {
  ref: string | undefined;
  source: string | undefined;
}

/**
 * How to get the model's files on this try (pure): from a peer that has them under the content
 * identity the mesh agrees on (taking them in turn over tries); else, when the catalog makes this
 * node the puller (or names none while this node's operator said where to get it), from the
 * operator's reference or source first, else the one the mesh announced; else wait for the member
 * that pulls it. A node still joining its mesh (it has heard from no member yet) pulls nothing: a
 * member may have the model, or be pulling it already. Holders that announce no identity, or
 * different ones, are never copied from: a name a member announces is its word, not the bytes.
 * `misled`: holders that sent other files than that content lately, not asked again for now.
 */
export function fetchPlan(entry: CatalogModel | undefined, self: string | undefined, own: OwnOrigin, attempt: number, joining = false, misled: ReadonlySet<string> = new Set()): FetchPlan {
  const peers = entry?.copyFrom.filter((id) => id !== self && !misled.has(id)) ?? [];
  if (peers.length) return { kind: "peer", peer: peers[attempt % peers.length]! };
  if (joining) return { kind: "wait", why: "joining the mesh first: a member may have it, or be downloading it" };
  const puller = entry?.puller;
  const mine = puller !== undefined ? puller === self : own.ref !== undefined || own.source !== undefined;
  if (!mine) return { kind: "wait", why: puller ? `node ${shortId(puller)} downloads it for the mesh; it is copied from there` : unverifiedHolders(entry, self, misled) };
  return downloadPlan(entry, own) ?? { kind: "wait", why: "no member has it and none knows where to get it" };
}

/** Why the model's holders give no copy, when some have it (pure). */
function unverifiedHolders(entry: CatalogModel | undefined, self: string | undefined, misled: ReadonlySet<string>): string {
  if (!entry?.nodesOnDisk.some((id) => id !== self)) return "no member has it and none knows where to get it";
  if (entry.copyFrom.some((id) => id !== self && misled.has(id))) return "the holders that announce its content sent other files; waiting for another holder";
  if (entry.contested) return "members announce different contents under its name, so none is copied (a --model reference or source of this node's own would be downloaded)";
  return "its holders have not announced its content identity yet (they may still be hashing it, or run an older version)";
}

/**
 * Where this node would download the model itself (pure): its operator's reference or source
 * first, else the one the mesh announced (`fromPeer`: fetched under the peer rules); undefined when
 * none says where. The puller downloads by it; a node copying the model over the mesh connection
 * may take it instead, when it is faster.
 */
export function downloadPlan(entry: CatalogModel | undefined, own: OwnOrigin): DownloadPlan | undefined {
  if (own.ref !== undefined) return { kind: "pull", ref: own.ref, fromPeer: false };
  if (own.source !== undefined) return { kind: "url", url: own.source, fromPeer: false };
  // A URL reference names the very file to get; the rest go through the Hub.
  const refKind = entry?.ref === undefined ? undefined : modelRefOf(entry.ref)?.kind;
  if (refKind === "hf") return { kind: "pull", ref: entry!.ref!, fromPeer: true };
  if (refKind === "url") return { kind: "url", url: entry!.ref!, fromPeer: true };
  if (entry?.source !== undefined) return { kind: "url", url: entry.source, fromPeer: true };
  return undefined;
}

/** Where a try fetches from, as its progress tells every peer: a URL without the user name and password the operator may have put in it. */
export function fetchedFrom(plan: Exclude<FetchPlan, { kind: "wait" }>): string {
  return plan.kind === "peer" ? plan.peer : withoutCredentials(plan.kind === "pull" ? plan.ref : plan.url);
}
