/**
 * One inference request's answer, once a dialect's handler has put it in the words llama-server
 * speaks: the mesh routes it (`dispatch.ts`), and it goes to the peer that serves its model, gets
 * the route's 503, or takes a slot of this node's server and is proxied there (`proxy.ts`). What
 * the serving node checks (a forced tool call its template cannot make), its figures and its
 * keep_alive (`keep-alive.ts`) are settled here, whichever dialect the client spoke.
 */
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { KvFollow } from "../../kv/kv-follow.ts";
import type { RequestStats } from "../../metrics/request-stats.ts";
import type { ModelInfo } from "../../models/model-store.ts";
import type { Route } from "../../placement/route.ts";
import { serverGone } from "../../pool/errors.ts";
import type { Pool } from "../../pool/pool.ts";
import { INFERENCE_ROUTES, LLAMA_ROUTES } from "../http/route-table.ts";
import { guardedAnswer } from "../http/sse-guard.ts";
import { dispatch, type Dispatching } from "./dispatch.ts";
import { applyKeepAlive, keepAliveHeaderValue, parseKeepAliveHeader, type MemberUnloads } from "./keep-alive.ts";
import { isNodeId, KV_HINT_MIN_BODY } from "./kv-hint.ts";
import { untilBodyEnds } from "./outstanding.ts";
import { recordPassingStats } from "./passing-stats.ts";
import { proxyToServer } from "./proxy.ts";
import { requestSource, takesSlot } from "./request-source.ts";
import { toolChoiceRefusal } from "./tool-choice.ts";
import { toolChoiceForServer } from "./named-tool-choice.ts";
import { blindCopyRefusal } from "./vision-models.ts";
import { isObject } from "../http/json.ts";
import { shortId } from "../../base/short-id.ts";
import { ANSWERED_BY_HEADER, FORWARDED_HEADER, KEEP_ALIVE_HEADER, KV_FROM_HEADER } from "../../mesh/mesh-headers.ts";
import { type MeshRouting } from "../../node/mesh-routing.ts";
import { irohReason } from "../../mesh/transport-kit.ts";

/** An answer refusing the request, in the shape of the API the client called. */
export type Refusal = (status: ContentfulStatusCode, message: string, type: string, code: string, retryAfterS?: number) => Response;

export interface InferenceCall {
  model: string;
  /** The public path it is sent to, after any translation: `/v1/...`, or llama-server's own at the root. */
  path: string;
  /** The bytes sent on, as they are. */
  body: ArrayBuffer;
  /** The same body parsed, for its affinity key and the serving node's checks. */
  json: unknown;
  /** performance.now() when the request came. */
  started: number;
  headers: Headers;
  /** The client's key, when it is one of the node's `--api-key` values (its fair-queue turn). */
  acceptedKey?: string | undefined;
  /** The client's: a request it gave up on is neither sent again nor answered. */
  signal: AbortSignal;
  /** It came from another node of the mesh: answered here, never forwarded or retried here. */
  forwarded: boolean;
  /** A local client's Ollama keep_alive (none: it gave none); a member's comes in its header. */
  keepAlive?: { ms: number | undefined } | undefined;
  refuse: Refusal;
  /** It goes to a peer. */
  onForwarded?: ((peerId: string) => void) | undefined;
  /** This node's server answered it whole: its figures, and for a stream when its first bytes came. */
  onAnswered?: ((stats: () => RequestStats, stream: { firstByteAt: number | undefined } | undefined) => void) | undefined;
  /** Silence before a streamed answer gets a keep-alive comment (the proxy's default when none). */
  keepAliveCommentMs?: number | undefined;
}

/** What answering needs of the serving core it belongs to. */
export interface InferenceParts {
  pool: Pool;
  routing: MeshRouting | undefined;
  dispatching: Dispatching;
  memberUnloads: MemberUnloads;
  findModel: (name: string) => Promise<ModelInfo>;
  recordStats: (stats: () => RequestStats) => void;
  /** Fetches a moved conversation's KV cache before this node's server reads it (`kv/kv-follow.ts`); none: never. */
  kvFollow?: Pick<KvFollow, "follow" | "answered" | "erase"> | undefined;
}

/** A client's Ollama keep_alive, in ms (undefined: it gave none), to apply where the request is answered; `member`: carried by one. */
type KeepAlive = { ms: number | undefined; member?: true };

/** How a stream from a peer ends when the peer goes away mid-answer (before it could end it itself). */
const PEER_GONE = { message: "the node serving this model went away mid-stream; retry", code: "peer_gone" };

/** The llama-server path of a public inference path (one of `INFERENCE_PATHS`). */
const upstreamPathOf = (path: string): string => (path.startsWith("/v1/") ? INFERENCE_ROUTES[path.slice(3)]! : LLAMA_ROUTES[path]!);

export async function answerInference(parts: InferenceParts, call: InferenceCall): Promise<Response> {
  const keepAlive = keepAliveOf(call, parts.memberUnloads, parts.routing);
  return dispatch({
    dispatching: parts.dispatching,
    model: call.model,
    json: call.json,
    bodyBytes: call.body.byteLength,
    header: (name) => call.headers.get(name) ?? undefined,
    forwarded: call.forwarded,
    signal: call.signal,
    send: (route, movedFrom) => send(parts, call, route, keepAlive, movedFrom),
  });
}

/**
 * The keep_alive a request carries: a local client's (the Ollama adapter's, in its bindings, which
 * no client sets), or the header of a request a member whose word counts forwarded, as far as a
 * member's counts; nothing anyone else sends counts (`keep-alive.ts`), a guest's included: it
 * moves nothing the owner's machines run.
 */
export function keepAliveOf(call: Pick<InferenceCall, "forwarded" | "headers" | "keepAlive" | "model">, unloads: MemberUnloads, routing: MeshRouting | undefined): KeepAlive | undefined {
  if (!call.forwarded) return call.keepAlive;
  if (!memberCounts(call, routing)) return undefined;
  const carried = parseKeepAliveHeader(call.headers.get(KEEP_ALIVE_HEADER));
  const ms = carried === undefined ? undefined : unloads.allows(call.model, carried);
  return ms === undefined ? undefined : { ms, member: true };
}

/** Sends a request where its route says: to a peer, a 503 the route gives, or this node's pool (none: no mesh). */
async function send(parts: InferenceParts, call: InferenceCall, route: Route | undefined, keepAlive: KeepAlive | undefined, movedFrom: string | undefined): Promise<Response> {
  if (route?.to === "peer") {
    call.onForwarded?.(route.peerId);
    // Its keep_alive goes along: the peer that answers applies it there; so does where its cache is.
    const res = await forward(parts.routing!, route.peerId, call, keepAlive, movedFrom);
    // The answer passes through here: this node's /api/v1/stats tells it too.
    const passed = recordPassingStats(res, call.model, upstreamPathOf(call.path), call.started, parts.recordStats);
    return guardedAnswer(passed, call.path, PEER_GONE);
  }
  if (route?.to === "unavailable") return call.refuse(503, route.message, "service_unavailable", "model_not_ready", route.retryAfterS);
  const upstreamPath = upstreamPathOf(call.path);
  // A tool choice this node's llama-server would take as auto is sent in words it keeps.
  const narrowed = isObject(call.json) ? toolChoiceForServer(call.path, call.json) : undefined;
  if (typeof narrowed === "string") return call.refuse(400, narrowed, "invalid_request_error", "invalid_tool_choice");
  const info = await parts.findModel(call.model);
  // This node's copy answers: one without a projector says so before it loads (llama-server would answer 500 once loaded).
  const blind = blindCopyRefusal(info, call.json);
  if (blind !== undefined) return call.refuse(400, blind, "invalid_request_error", "model_not_vision");
  const lease = await parts.pool.acquire(info, call.signal, takesSlot(upstreamPath) ? requestSource(call.headers, call.acceptedKey) : undefined);
  // Only the node that serves the model knows its chat template: a tool call it cannot make is refused here, whoever sent the request.
  const noTools = toolChoiceRefusal(call.path, call.model, call.json, lease.server.templateCaps);
  if (noTools !== undefined) {
    lease.release();
    return call.refuse(400, noTools, "invalid_request_error", "tool_calls_unsupported");
  }
  const self = parts.routing?.nodeId();
  // The node that held this conversation last: ours to know, or as the member that routed it says
  // (a node id, asked only if a member; a guest's word moves no KV between the owner's machines).
  const holder = call.forwarded ? (memberCounts(call, parts.routing) ? call.headers.get(KV_FROM_HEADER) : undefined) : movedFrom;
  const followed = parts.kvFollow && isNodeId(holder) && holder !== self ? await parts.kvFollow.follow(lease.server, upstreamPath, call.json, holder, !call.forwarded) : undefined;
  const slot = followed?.slot;
  const long = parts.kvFollow !== undefined && call.body.byteLength >= KV_HINT_MIN_BODY;
  const res = await proxyToServer({
    lease,
    model: call.model,
    path: upstreamPath,
    body: slot === undefined ? (narrowed === undefined ? call.body : encoded(narrowed)) : pinnedTo(narrowed ?? call.json, slot),
    clientSignal: call.signal,
    extraHeaders: self ? { [ANSWERED_BY_HEADER]: self } : undefined,
    keepAliveMs: call.keepAliveCommentMs,
    ownFence: followed?.fence?.held,
    // A cache a member that is not one of the owner's machines made served this request alone: its slot is emptied before the slot is given back.
    beforeRelease: followed?.erase
      ? async () => {
          await parts.kvFollow!.erase(lease.server, followed.slot);
          followed.fence?.lift();
        }
      : undefined,
    onStats: (figures, stream) => {
      // Worked out once, by whichever asks first (the metrics, the last request's stats, the rate below).
      let worked: RequestStats | undefined;
      const s = () => (worked ??= figures());
      parts.recordStats(s);
      call.onAnswered?.(s, stream);
      // A long prompt's reading tells the rate a cache fetch is weighed against.
      if (long) {
        const read = s();
        parts.kvFollow!.answered(lease.server, read.prompt_read, read.time_to_first_token === null ? undefined : read.time_to_first_token * 1000);
      }
    },
  });
  // Answered here: its keep_alive applies to this node's server once the answer has gone.
  if (!keepAlive || !res.ok) return res;
  return untilBodyEnds(res, () => {
    const effect = applyKeepAlive(parts.pool, call.model, keepAlive.ms);
    if (keepAlive.member && effect.action === "unload") parts.memberUnloads.unloaded(call.model);
  });
}

/** Whether the member that forwarded a request is one whose word counts here (a guest's does not; no mesh: any). */
function memberCounts(call: Pick<InferenceCall, "headers">, routing: MeshRouting | undefined): boolean {
  const member = call.headers.get(FORWARDED_HEADER);
  return member === null || routing?.counts === undefined || routing.counts(member);
}

/** The body pinned to the slot a fetched cache was restored into (llama-server's `id_slot`). */
const encoded = (json: unknown): ArrayBuffer => new TextEncoder().encode(JSON.stringify(json)).buffer as ArrayBuffer;
const pinnedTo = (json: unknown, slot: number): ArrayBuffer => encoded({ ...(json as Record<string, unknown>), id_slot: slot });

async function forward(routing: MeshRouting, peer: string, call: InferenceCall, keepAlive: KeepAlive | undefined, movedFrom: string | undefined): Promise<Response> {
  const carried = keepAliveHeaderValue(keepAlive?.ms);
  const headers = { "content-type": "application/json", ...(carried === undefined ? {} : { [KEEP_ALIVE_HEADER]: carried }), ...(movedFrom === undefined ? {} : { [KV_FROM_HEADER]: movedFrom }) };
  try {
    return await routing.forward(peer, { method: "POST", path: call.path, headers, body: new Uint8Array(call.body) }, call.signal);
  } catch (err) {
    // iroh's errors carry their causes and a native stack trace over several lines: the causes are enough.
    throw serverGone(`the node serving this model (${shortId(peer)}) could not be reached: ${irohReason(err)}`);
  }
}
