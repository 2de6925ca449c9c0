/**
 * One inference request's way to a server of its model. The mesh routes it; when the model has
 * several servers (its host and replicas), the request's affinity key and the servers' loads pick
 * one (`pickServer`). When that server fails before any byte of an answer (a peer that cannot be
 * reached, a 503 from a stale route or a server that went away, our own server gone), the request
 * goes once more to another server of the model, so the client sees one answer. Never after a
 * byte went to the client, and never for a request another node sent us: that node retries.
 */
import { pickServer } from "../../placement/pick-server.ts";
import type { Chooser, Route } from "../../placement/route.ts";
import { PoolError } from "../../pool/errors.ts";
import { affinityKey } from "./affinity.ts";
import { KV_HINT_MIN_BODY, type LastServers } from "./kv-hint.ts";
import { untilBodyEnds, type Outstanding } from "./outstanding.ts";
import { RETRIED_FROM_HEADER } from "../../mesh/mesh-headers.ts";
import { FORWARDED_HEADER } from "../../mesh/mesh-headers.ts";
import { type MeshRouting } from "../../node/mesh-routing.ts";


/** What dispatching needs of its node, and what it keeps: the requests in flight per server, and the turn for requests without a key. */
export interface Dispatching {
  /** The mesh's routing; none: no mesh, everything is this node's pool. */
  readonly routing: MeshRouting | undefined;
  /** Requests that share a prompt prefix go to the same server of their model (`--affinity`). */
  readonly affinity: boolean;
  readonly outstanding: Outstanding;
  turn: number;
  /** The server each long conversation went to last (`kv-hint.ts`); none: caches do not follow conversations. */
  readonly lastServers?: LastServers | undefined;
}

export interface DispatchInput {
  dispatching: Dispatching;
  model: string;
  /** The parsed body, for its affinity key. */
  json: unknown;
  /** The body's size: only a long prompt's cache is worth following. */
  bodyBytes: number;
  header: (name: string) => string | undefined;
  /** It came from another node of the mesh: answered here, never retried here. */
  forwarded: boolean;
  /** The client's: a request it gave up on is not sent again. */
  signal: AbortSignal;
  /**
   * Sends the request where the route says (none: no mesh, this node's pool) and resolves with the
   * answer, its body unread; `movedFrom`: the server that answered this conversation last, another.
   */
  send: (route: Route | undefined, movedFrom?: string) => Promise<Response>;
}

/** What a server's failure looked like: an answer's status, or what was thrown. */
export type Outcome = { status: number } | { thrown: unknown };

/**
 * Whether the server failed the request before answering it, so another may answer instead (pure):
 * a 503 (a route gone stale, a server gone, a load that timed out there) or our own server or the
 * peer gone (`serverGone`, which `forward` and the proxy throw). Not a 429 (a full queue: the mesh
 * is busy), nor any other error, nor anything on a route that named no server.
 */
export function failedBeforeAnswer(route: Route | undefined, outcome: Outcome): boolean {
  if (route?.to !== "local" && route?.to !== "peer") return false;
  if ("status" in outcome) return outcome.status === 503;
  return outcome.thrown instanceof PoolError && outcome.thrown.code === "model_server_exited";
}

/**
 * The server a request failed on, to be avoided on its one more try; none when it is not tried
 * again (pure): it was forwarded to us (its sender retries), its client left, it did not fail
 * before an answer, or the model has no other server.
 */
export function retryAvoiding(o: { forwarded: boolean; aborted: boolean; route: Route | undefined; outcome: Outcome; self: string | undefined; servers: readonly string[] }): string | undefined {
  const failed = serverOf(o.route, o.self);
  if (o.forwarded || o.aborted || failed === undefined || !failedBeforeAnswer(o.route, o.outcome)) return undefined;
  return o.servers.some((id) => id !== failed) ? failed : undefined;
}

/** The server a route sends to, by node id. */
export const serverOf = (route: Route | undefined, self: string | undefined): string | undefined =>
  route?.to === "peer" ? route.peerId : route?.to === "local" ? self : undefined;

/** The server that answered a long conversation's last turn, when this turn goes to another (`kv-hint.ts`); remembers this one. */
function movedFrom(input: DispatchInput, server: string | undefined, keyOf: () => string | undefined): string | undefined {
  const last = input.dispatching.lastServers;
  if (!last || server === undefined || input.forwarded || input.bodyBytes < KV_HINT_MIN_BODY) return undefined;
  const key = keyOf();
  return key === undefined ? undefined : last.moved(input.model, key, server);
}

/** The requests a node has in flight per (model, server). */
export const outstandingOf = (d: Dispatching): Outstanding => d.outstanding;

export async function dispatch(input: DispatchInput): Promise<Response> {
  const { dispatching: state, model, forwarded } = input;
  const routing = state.routing;
  const self = routing?.nodeId();
  // Worked out once, and only when there is a choice to make.
  let key: string | undefined | null = null;
  const keyOf = () => (key === null ? (key = !state.affinity ? undefined : affinityKey(input.json, input.header)) : key);
  const avoid = new Set<string>();
  // A model with one server has nothing to choose (what `pickServer` gives for one): no key, no loads.
  const choose: Chooser = (servers) =>
    servers.length === 1
      ? avoid.has(servers[0]!)
        ? undefined
        : servers[0]
      : pickServer({
          servers: servers.map((id) => {
            const announced = id === self ? routing?.ownLoad?.(model) : routing?.announcedLoad?.(id, model);
            return { nodeId: id, outstanding: state.outstanding.count(model, id), ...(announced ? { announced } : {}) };
          }),
          key: keyOf(),
          avoid,
          turn: state.turn++,
          ...(self !== undefined ? { own: self } : {}),
        });

  const member = forwarded ? input.header(FORWARDED_HEADER) : undefined;
  const routeNow = async () => (routing ? await routing.route(model, forwarded, forwarded ? undefined : choose, member) : undefined);
  const attempt = async (route: Route | undefined, movedFrom?: string): Promise<{ route: Route | undefined; res?: Response; thrown?: unknown }> => {
    const server = serverOf(route, self);
    // Counted only where there is a server to count: a node without a mesh has nothing to choose.
    const end = server === undefined ? undefined : state.outstanding.begin(model, server);
    try {
      const res = await input.send(route, movedFrom);
      return { route, res: end ? untilBodyEnds(res, end) : res };
    } catch (err) {
      end?.();
      return { route, thrown: err };
    }
  };

  const firstRoute = await routeNow();
  const first = await attempt(firstRoute, movedFrom(input, serverOf(firstRoute, self), keyOf));
  const outcome: Outcome = first.res ? { status: first.res.status } : { thrown: first.thrown };
  // The catalog is looked at only for a failure: an answer's way back stays off it.
  const servers = failedBeforeAnswer(first.route, outcome) ? (routing?.catalog().find((m) => m.name === model)?.servers ?? []) : [];
  const failed = retryAvoiding({ forwarded, aborted: input.signal.aborted, route: first.route, outcome, self, servers });
  if (failed === undefined) {
    if (first.res) return first.res;
    throw first.thrown;
  }
  avoid.add(failed);
  // Only another server: a route that falls back to the one that failed (the chooser left with
  // nothing but it, a model loading there) gives the first answer, not the same failure twice.
  const again = await routeNow();
  const next = serverOf(again, self);
  if (next === undefined || avoid.has(next)) {
    if (first.res) return first.res;
    throw first.thrown;
  }
  // Its answer is dropped unread: nothing of it reached the client.
  await first.res?.body?.cancel().catch(() => undefined);
  const second = await attempt(again);
  if (!second.res) throw second.thrown;
  const headers = new Headers(second.res.headers);
  headers.set(RETRIED_FROM_HEADER, failed);
  return new Response(second.res.body, { status: second.res.status, statusText: second.res.statusText, headers });
}
