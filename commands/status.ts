/**
 * `mesh status`: asks the node listening at --listen:--port about itself and its mesh. The API never
 * tells the join token; it comes from the state dir, when that is this node's and readable.
 */
import type { Config } from "../config/config.ts";
import type { CatalogModel } from "../placement/catalog.ts";
import { decodeJoinToken } from "../mesh/join-token.ts";
import { readJoinToken } from "../mesh/join-token-file.ts";
import type { MeshStatus, PeerStatus } from "../mesh/status.ts";
import type { OwnTrust } from "../mesh/roster-state.ts";
import type { FetchProgress } from "../node/model-fetcher.ts";
import { CommandError, localUrl } from "./common.ts";
import { localNode } from "./local-node.ts";
import { shortId } from "../base/short-id.ts";

type StatusBody = MeshStatus & {
  version: string;
  models?: { assigned: string | null; fetching: FetchProgress | null; catalog: CatalogModel[] };
};

const gib = (bytes: number) => `${(bytes / 2 ** 30).toFixed(1)} GiB`;
/** A peer's words on a terminal: what it announced, without the control characters that would drive the terminal. */
const printable = (text: string) => text.replace(/[\x00-\x1f\x7f-\x9f]/g, "?");

const day = (ms: number) => new Date(ms).toISOString().slice(0, 16).replace("T", " ");
const expiry = (ms: number | undefined) => (ms === undefined ? "no expiry" : `expires ${day(ms)} UTC`);

/** This node's standing under its roster, in one line (pure). */
export function trustLine(t: OwnTrust | undefined): string {
  if (!t || t.state === "unanchored") return "unanchored: every member may be elected host (`mesh roster init` makes a roster)";
  const roster = `roster ${shortId(t.roster)}, ${t.closed ? "closed to peers without a vouch or pass" : "open: peers without a pass count as guests"}`;
  if (t.state === "vouched") return `vouched: one of the owner's machines (${roster})`;
  return `guest ${t.name ?? "(no pass)"}${t.name ? ` (${expiry(t.expiresAt)})` : ""} (${roster})${t.refused ? `; refused: ${t.refused}` : ""}`;
}

/** How a peer stands, as a status line shows it. */
export const standingText = (p: Pick<PeerStatus, "standing" | "guest">): string =>
  p.standing === "guest" ? `guest ${p.guest?.name ?? "(no pass)"}${p.guest?.name ? ` (${expiry(p.guest.expiresAt)})` : ""}` : p.standing;

/** The human-readable form (pure, so it is tested as text). */
export function formatStatus(url: string, s: StatusBody, token: string | undefined, now = Date.now()): string {
  const lines = [
    `node     ${s.nodeId ?? "(mesh endpoint starting)"}  mesh ${s.version}  api ${url}`,
    `line     ${s.line ?? "-"}  relay ${s.relay ?? "-"}${s.line === "iroh035" ? "  (0.35 relays are being retired: see \"Moving a mesh to iroh 1.x\" in the README)" : ""}`,
    `trust    ${trustLine(s.trust)}`,
    `token    ${token ?? "- (`mesh token` with this node's --state-dir prints it)"}`,
    `peers    ${s.peers.length}`,
  ];
  for (const p of s.peers) {
    const serving = p.serving.length ? `serving ${p.serving.join(",")}` : "serving nothing";
    lines.push(`  ${p.shortId}  ${p.line}  ${printable(p.addresses.join(","))}  relay ${printable(p.relayUrl ?? "none")}  rtt ${p.rttMs} ms  ${p.role}  ${serving}  vram ${gib(p.vramBytes)}  ${standingText(p)}`);
  }
  for (const p of s.peers.filter((p) => p.standing === "guest" && p.serving.length > 0)) {
    lines.push(`  ! ${standingText(p)} (${p.shortId}) claims to serve ${printable(p.serving.join(","))}: not used for this node's clients`);
  }
  for (const r of s.refused ?? []) lines.push(`refused  ${shortId(r.nodeId)}  ${Math.round((now - r.at) / 1000)} s ago: ${printable(r.why)}`);
  if (s.models) {
    const f = s.models.fetching;
    const progress = f ? `  fetching ${f.model} ${f.total ? `${((100 * f.bytes) / f.total).toFixed(0)}%` : `${gib(f.bytes)}`}` : "";
    lines.push(`models   ${s.models.catalog.length}  assigned ${s.models.assigned ?? "none"}${progress}`);
    const standingOf = (id: string) => (id === s.nodeId ? "this node" : (s.peers.find((p) => p.nodeId === id)?.standing ?? "gone"));
    for (const m of s.models.catalog) {
      const host = m.host ? `host ${shortId(m.host)} (${standingOf(m.host)})` : "no host";
      lines.push(`  ${m.name}  ${m.status}  ${host}  group ${m.nodesServing.length}  need ${gib(m.needBytes)} of ${gib(m.capacityBytes)}`);
    }
  }
  return lines.join("\n");
}

export async function showStatus(config: Config, json: boolean): Promise<void> {
  const node = await localNode(config);
  if (!node) throw new CommandError(`no node answering at ${localUrl(config)} (start one with \`mesh\`, or point --listen/--port at it)`);
  const url = node.url;
  let body: StatusBody;
  try {
    const res = await fetch(`${url}/api/status`, { signal: AbortSignal.timeout(5000), headers: node.headers });
    if (!res.ok) throw new CommandError(`the node at ${url} answered ${res.status}: ${await res.text()}`);
    body = (await res.json()) as StatusBody;
  } catch (err) {
    if (err instanceof CommandError) throw err;
    throw new CommandError(`no node answering at ${url} (start one with \`mesh\`, or point --listen/--port at it)`);
  }
  const token = ownToken(config.stateDir, body.nodeId);
  console.log(json ? JSON.stringify({ url, ...body, token: token ?? null }, null, 2) : formatStatus(url, body, token));
}

/** The token in `stateDir`, if it is the answering node's (another node may own the default dir). */
export function ownToken(stateDir: string, nodeId: string | null): string | undefined {
  const token = readJoinToken(stateDir);
  if (!token || !nodeId) return undefined;
  try {
    return decodeJoinToken(token).addr.nodeId === nodeId ? token : undefined;
  } catch {
    return undefined;
  }
}
