/**
 * The Mesh tab: the map of nodes and groups, its legend, this node's standing under the mesh's
 * roster, and one row per node with what this node knows of it (standing, state, path, round
 * trip, memory, roles, llama.cpp build, uptime, tunnel bytes).
 */
import type { ConsoleNode, ConsoleState, GroupRole, NodeState } from "../../protocol.ts";
import { DASH, formatAgo, formatBytes, formatDuration, formatRtt } from "../format.ts";
import { mapGroups, MeshMap } from "./mesh-map.tsx";
import { Card, Cell, Empty, Meter, Pill, Table, type Tone } from "./parts.tsx";
import { shortId } from "../format.ts";

const STATE_TONE: Record<NodeState, Tone> = { up: "ok", silent: "warn", gone: "muted" };
const ROLE_TONE: Record<GroupRole, Tone> = { host: "accent", worker: "info", replica: "ok", standby: "muted" };

function pathText(n: ConsoleNode): string {
  if (n.self) return "this node";
  const quic = { self: "self", direct: "QUIC direct", relay: "QUIC relay", mixed: "QUIC mixed", none: "no QUIC path" }[n.quicPath];
  return n.directTls ? `direct TLS (${quic})` : quic;
}

/** A relay by its host, which is what tells one from another. */
function relayText(url: string | null): string {
  if (!url) return "no relay";
  try {
    return `relay ${new URL(url).host}`;
  } catch {
    return `relay ${url}`;
  }
}

const STANDING_TONE: Record<ConsoleNode["standing"], Tone> = { vouched: "ok", guest: "warn", member: "muted" };

function standingText(n: ConsoleNode): string {
  if (n.standing !== "guest") return n.standing === "vouched" ? "owner's machine" : "member";
  return `guest ${n.guest?.name ?? "(no pass)"}`;
}

/** This node's standing under its roster, as one line the page shows above the map. */
export function trustText(t: ConsoleState["trust"]): { tone: Tone; text: string } {
  if (t.state === "unanchored") return { tone: "warn", text: "unanchored: every member may be elected host (`mesh roster init` makes a roster)" };
  if (t.state === "vouched") return { tone: "ok", text: `this node holds the roster's key · roster ${shortId(t.roster ?? "")}${t.closed ? " · closed to peers without a pass" : ""}` };
  return { tone: t.refused ? "err" : "info", text: `a guest of this mesh · roster ${shortId(t.roster ?? "")}${t.refused ? ` · refused: ${t.refused}` : ""}` };
}

function NodeRow({ n }: { n: ConsoleNode }) {
  return (
    <tr data-testid="node-row" data-node-id={n.id} data-state={n.state} class={`state-${n.state}`}>
      <Cell label="Node">
        <span class="mono strong" title={n.id}>
          {n.shortId}
        </span>{" "}
        {n.self && <Pill tone="accent">this node</Pill>}
        <div class="sub">mesh {n.meshVersion || DASH}</div>
      </Cell>
      <Cell label="Standing">
        <span data-testid="node-standing" data-standing={n.standing}>
          <Pill tone={STANDING_TONE[n.standing]}>{standingText(n)}</Pill>
        </span>
        {n.guest?.expiresAt != null && <div class="sub">expires {new Date(n.guest.expiresAt).toISOString().slice(0, 16).replace("T", " ")} UTC</div>}
        {n.claimsServing.length > 0 && (
          <div class="sub warn" data-testid="guest-claims">
            claims to serve {n.claimsServing.join(", ")}: not used for this node's clients
          </div>
        )}
      </Cell>
      <Cell label="State">
        <Pill tone={STATE_TONE[n.state]}>{n.state}</Pill>
        {!n.self && n.state !== "up" && <div class="sub">seen {formatAgo(n.lastSeenMsAgo)}</div>}
      </Cell>
      <Cell label="Path">
        {pathText(n)}
        <div class="sub">{n.self ? "" : `rtt ${formatRtt(n.rttMs)}`}</div>
        <div class="sub" data-testid="node-line" title={n.relayUrl ? `home relay ${n.relayUrl}` : "no relay: reached by its direct addresses"}>
          {n.line} · {relayText(n.relayUrl)}
        </div>
      </Cell>
      <Cell label="Memory">
        <Meter value={n.memoryUsedBytes} max={n.memoryOfferedBytes} label={`memory used of offered on ${n.shortId}`} />
        <div class="sub">
          {formatBytes(n.memoryUsedBytes)} / {formatBytes(n.memoryOfferedBytes)}
          <span title="the machine's RAM"> · RAM {formatBytes(n.ramBytes)}</span>
        </div>
      </Cell>
      <Cell label="Roles">
        {n.roles.length === 0 ? (
          <Pill tone="muted">idle</Pill>
        ) : (
          <ul class="chips">
            {n.roles.map((r) => (
              <li key={r.model}>
                <Pill tone={ROLE_TONE[r.role]} title={`${r.role} of ${r.model}`}>
                  {r.role}
                </Pill>{" "}
                <span class="mono">{r.model}</span>
              </li>
            ))}
          </ul>
        )}
      </Cell>
      <Cell label="llama.cpp">
        <span class="mono">{n.llamaBuild || DASH}</span>
        <div class="sub">rpc {n.rpcProtocol || DASH}</div>
      </Cell>
      <Cell label="Uptime" class="nowrap">
        {formatDuration(n.uptimeS)}
      </Cell>
      <Cell label="Tunnel">
        {n.self ? (
          DASH
        ) : (
          <span class="nowrap">
            <span title="received">↓ {formatBytes(n.tunnelBytes.in)}</span>
            <br />
            <span title="sent">↑ {formatBytes(n.tunnelBytes.out)}</span>
          </span>
        )}
      </Cell>
      <Cell label="Addresses">
        <ul class="addrs mono">
          {n.addresses.length === 0 ? <li>{DASH}</li> : n.addresses.map((a) => <li key={a}>{a}</li>)}
        </ul>
        {n.apiPort > 0 && <div class="sub">api :{n.apiPort}</div>}
      </Cell>
    </tr>
  );
}

export function MeshView({ state }: { state: ConsoleState | null }) {
  if (!state) return <Empty>Waiting for the node…</Empty>;
  const groups = mapGroups(state.models);
  const up = state.nodes.filter((n) => n.state === "up").length;
  const trust = trustText(state.trust);
  return (
    <div class="stack">
      <p class="trust" data-testid="trust" data-trust={state.trust.state}>
        <Pill tone={trust.tone}>{state.trust.state === "vouched" ? "owner's machine" : state.trust.state}</Pill> {trust.text}
      </p>
      <Card title="Mesh" actions={<span class="muted">{`${up} of ${state.nodes.length} node${state.nodes.length === 1 ? "" : "s"} up`}</span>}>
        <div class="map-wrap">
          <MeshMap nodes={state.nodes} groups={groups} />
          <div class="legends">
          <ul class="legend" aria-label="Model groups">
            {groups.length === 0 && <li class="muted">No model groups yet.</li>}
            {groups.map((g) => (
              <li key={g.model.name}>
                <span class="swatch" style={{ background: g.color }} aria-hidden="true" />
                <span class="mono">{g.model.name}</span>
                <span class="muted">
                  {" "}
                  {g.model.members.length} node{g.model.members.length === 1 ? "" : "s"}
                  {g.model.split ? " · split" : ""}
                </span>
              </li>
            ))}
          </ul>
          <ul class="legend legend-paths" aria-label="Link styles">
            <li>
              <span class="line-swatch path-direct" aria-hidden="true" /> direct
            </li>
            <li>
              <span class="line-swatch path-relay" aria-hidden="true" /> relay
            </li>
            <li>
              <span class="line-swatch path-none" aria-hidden="true" /> no path
            </li>
            <li>
              <span class="line-swatch path-tls" aria-hidden="true" /> direct TLS for RPC
            </li>
          </ul>
          </div>
        </div>
      </Card>
      <Card title="Nodes">
        <Table columns={["Node", "Standing", "State", "Path", "Memory", "Roles", "llama.cpp", "Uptime", "Tunnel", "Addresses"]}>
          {state.nodes.map((n) => (
            <NodeRow key={n.id} n={n} />
          ))}
        </Table>
      </Card>
    </div>
  );
}
