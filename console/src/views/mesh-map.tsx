/**
 * The mesh as a picture: this node in the middle, its peers around it, each link drawn as the path
 * this node reaches the peer by (QUIC direct, relay, mixed, none; TLS when RPC tunnels take the
 * direct TLS path) with its round trip, and each model group that spans several nodes as a
 * coloured arc from its host to its members. Silent nodes are amber, gone ones faded and dashed.
 */
import type { ConsoleModel, ConsoleNode } from "../../protocol.ts";
import { formatBytes, formatRtt } from "../format.ts";
import { colorAt } from "./parts.tsx";

const W = 640;
const H = 330;
const R_NODE = 26;
/** Room around the outermost nodes for their badges and labels. */
const MARGIN = 56;

interface Placed {
  node: ConsoleNode;
  x: number;
  y: number;
}

/** Where each node sits: self at the centre (alone: the only one), peers evenly on an ellipse. */
export function place(nodes: readonly ConsoleNode[]): Placed[] {
  const self = nodes.find((n) => n.self);
  const ring = nodes.filter((n) => n !== self);
  const cx = W / 2;
  const cy = H / 2 - 6;
  const out: Placed[] = self ? [{ node: self, x: cx, y: cy }] : [];
  if (!self && ring.length === 1) return [{ node: ring[0]!, x: cx, y: cy }];
  // One or two peers read best side by side with this node; more go round it from the top.
  const start = ring.length <= 2 ? 0 : -Math.PI / 2;
  ring.forEach((node, i) => {
    const a = start + (2 * Math.PI * i) / ring.length;
    out.push({ node, x: cx + 230 * Math.cos(a), y: cy + 125 * Math.sin(a) });
  });
  return out;
}

/** The nodes' bounding box with a margin, never smaller than a sensible minimum (one node is not drawn huge). */
function viewBox(placed: readonly Placed[]): string {
  if (placed.length === 0) return `0 0 ${W} 160`;
  const xs = placed.map((p) => p.x);
  const ys = placed.map((p) => p.y);
  let x0 = Math.min(...xs) - MARGIN - 40;
  let x1 = Math.max(...xs) + MARGIN + 40;
  let y0 = Math.min(...ys) - MARGIN;
  let y1 = Math.max(...ys) + MARGIN;
  const minW = 640;
  const minH = 220;
  if (x1 - x0 < minW) [x0, x1] = [(x0 + x1 - minW) / 2, (x0 + x1 + minW) / 2];
  if (y1 - y0 < minH) [y0, y1] = [(y0 + y1 - minH) / 2, (y0 + y1 + minH) / 2];
  return `${x0.toFixed(0)} ${y0.toFixed(0)} ${(x1 - x0).toFixed(0)} ${(y1 - y0).toFixed(0)}`;
}

const PATH_LABEL: Record<ConsoleNode["quicPath"], string> = { self: "this node", direct: "QUIC direct", relay: "relay", mixed: "mixed", none: "no path" };

function Link({ from, to }: { from: Placed; to: Placed }) {
  const p = to.node;
  const mx = (from.x + to.x) / 2;
  const my = (from.y + to.y) / 2;
  const label = `${p.directTls ? "TLS" : PATH_LABEL[p.quicPath]}${p.rttMs !== null ? ` · ${formatRtt(p.rttMs)}` : ""}`;
  // Beside a steep line, above a flat one, so the label never sits on the line or a node's label.
  const steep = Math.abs(to.y - from.y) > Math.abs(to.x - from.x);
  return (
    <g class={`map-link path-${p.quicPath} ${p.directTls ? "path-tls" : ""} state-${p.state}`}>
      <line x1={from.x} y1={from.y} x2={to.x} y2={to.y} />
      <text x={steep ? mx + 10 : mx} y={steep ? my + 4 : my - 7} class="map-link-label" text-anchor={steep ? "start" : "middle"}>
        {label}
      </text>
    </g>
  );
}

/** An arc from a group's host to one member, bent by the group's index so groups over the same pair stay apart. */
function GroupArc({ a, b, color, bend }: { a: Placed; b: Placed; color: string; bend: number }) {
  const mx = (a.x + b.x) / 2;
  const my = (a.y + b.y) / 2;
  const dx = b.x - a.x;
  const dy = b.y - a.y;
  const len = Math.hypot(dx, dy) || 1;
  const cx = mx + (-dy / len) * bend;
  const cy = my + (dx / len) * bend;
  return <path d={`M ${a.x} ${a.y} Q ${cx} ${cy} ${b.x} ${b.y}`} class="map-group" stroke={color} />;
}

export interface MapGroup {
  model: ConsoleModel;
  color: string;
}

/** The groups worth drawing: models with members, each with its colour (kept stable by catalog order). */
export function mapGroups(models: readonly ConsoleModel[]): MapGroup[] {
  return models.filter((m) => m.members.length > 0).map((model, i) => ({ model, color: colorAt(i) }));
}

export function MeshMap({ nodes, groups }: { nodes: readonly ConsoleNode[]; groups: readonly MapGroup[] }) {
  const placed = place(nodes);
  const byId = new Map(placed.map((p) => [p.node.id, p]));
  const self = placed.find((p) => p.node.self);
  const up = nodes.filter((n) => n.state === "up").length;
  const box = viewBox(placed);
  return (
    <svg
      data-testid="mesh-map"
      class="mesh-map"
      viewBox={box}
      role="img"
      aria-label={`Mesh map: ${nodes.length} node${nodes.length === 1 ? "" : "s"} (${up} up), ${groups.length} model group${groups.length === 1 ? "" : "s"}`}
    >
      {self && placed.filter((p) => p !== self).map((p) => <Link key={`l-${p.node.id}`} from={self} to={p} />)}
      {groups.flatMap((g, gi) => {
        const host = g.model.members.find((m) => m.role === "host") ?? g.model.members[0];
        const hp = host && byId.get(host.id);
        if (!hp) return [];
        return g.model.members
          .filter((m) => m.id !== host.id && byId.has(m.id))
          .map((m) => <GroupArc key={`g-${g.model.name}-${m.id}`} a={hp} b={byId.get(m.id)!} color={g.color} bend={18 + 12 * gi} />);
      })}
      {placed.map((p) => {
        const mine = groups.filter((g) => g.model.members.some((m) => m.id === p.node.id));
        const n = p.node;
        return (
          <g key={n.id} class={`map-node state-${n.state} ${n.self ? "map-self" : ""}`} transform={`translate(${p.x} ${p.y})`}>
            <title>{`${n.id}\n${n.state}${n.rttMs !== null ? `, rtt ${formatRtt(n.rttMs)}` : ""}\nmemory ${formatBytes(n.memoryUsedBytes)} of ${formatBytes(n.memoryOfferedBytes)}`}</title>
            <circle r={R_NODE} />
            <text class="map-node-id" y={4} text-anchor="middle">
              {n.shortId.slice(0, 6)}
            </text>
            <text class="map-node-label" y={R_NODE + 15} text-anchor="middle">
              {n.self ? "this node" : n.state === "up" ? formatBytes(n.memoryOfferedBytes) : n.state}
            </text>
            {mine.map((g, i) => (
              <circle key={g.model.name} class="map-badge" r={5} cx={(i - (mine.length - 1) / 2) * 12} cy={-R_NODE - 8} fill={g.color}>
                <title>{`${g.model.name}: ${g.model.members.find((m) => m.id === n.id)?.role ?? ""}`}</title>
              </circle>
            ))}
          </g>
        );
      })}
    </svg>
  );
}
