/**
 * What the console page reads from its node: one server-sent-events stream,
 * `GET /api/console/events` (a `hello` with everything, then `state`, `traffic` and `log` events as
 * they happen), and the same state whole from `GET /api/console/state`. Both sides import these
 * types; the page holds at most `CONSOLE_LIMITS` of what the stream sends, however long it stays open.
 */

export const CONSOLE_LIMITS = {
  /** Traffic samples kept (server and page): ten minutes at one every `trafficEveryMs`. */
  trafficSamples: 300,
  trafficEveryMs: 2_000,
  /** Log lines kept (server and page). */
  logLines: 500,
  /** Nodes that left, still shown as gone (the most recent ones), and for how long. */
  goneNodes: 64,
  goneForMs: 60 * 60_000,
} as const;

export type NodeState = "up" | "silent" | "gone";
/** How this node reaches the peer: itself; QUIC direct (UDP) or through a relay; and whether RPC tunnels use the direct TLS path. */
export type QuicPath = "self" | "direct" | "relay" | "mixed" | "none";
/** A replica serves the model whole beside its host (`placement/replicas.ts`). */
export type GroupRole = "host" | "worker" | "standby" | "replica";

export interface ConsoleNode {
  id: string;
  shortId: string;
  self: boolean;
  /** `silent`: nothing heard for over two heartbeats; `gone`: dropped from the mesh (kept a while to show it). */
  state: NodeState;
  lastSeenMsAgo: number;
  addresses: string[];
  quicPath: QuicPath;
  /** RPC tunnels to it go over the direct TLS path (else over QUIC streams). */
  directTls: boolean;
  /** Offers a direct TLS path at all. */
  offersDirect: boolean;
  rttMs: number | null;
  /** The iroh line it runs (`iroh035` for nodes that did not say), and its home relay if it has one. */
  line: "iroh035" | "iroh1";
  relayUrl: string | null;
  memoryOfferedBytes: number;
  /** What the models it serves or takes part in use of its memory (estimated from their needs and the split). */
  memoryUsedBytes: number;
  ramBytes: number;
  /** Its place in each model's group, and the models it serves alone on demand (as host). */
  roles: { model: string; role: GroupRole }[];
  meshVersion: string;
  llamaBuild: string;
  rpcProtocol: string;
  /** Seconds since it started, as it announced its start; null when it did not (an older version). */
  uptimeS: number | null;
  apiPort: number;
  /** Bytes of RPC tunnels with it, from this node's counters; zero for this node itself. */
  tunnelBytes: { in: number; out: number };
  /**
   * How it stands under the mesh's roster, as this node checked it (never its word): one of the
   * owner's machines, a guest (its pass's name and expiry, ms since the epoch), or a member of an
   * unanchored mesh. This node's own row says how it stands itself.
   */
  standing: "vouched" | "guest" | "member";
  guest: { name: string | null; expiresAt: number | null } | null;
  /** Models a guest claims to serve: not used for this node's clients. */
  claimsServing: string[];
}

export type ConsoleModelStatus = "ready" | "loading" | "fetching" | "needs-capacity" | "failed" | "unloaded";

export interface ConsoleModel {
  name: string;
  status: ConsoleModelStatus;
  /** `fetching`: a member copying or downloading its files. */
  fetch?: { node: string; bytes: number; total: number; from: string };
  /** `loading`: seconds since this node saw it start loading. */
  loadingForS?: number;
  /** `needs-capacity`: bytes the group lacks. */
  missingBytes?: number;
  failure?: { error: string; retryInS: number };
  host: string | null;
  servedBy: string | null;
  /** The group: host, workers its server runs over (with their share of the layers), members standing by. */
  members: { id: string; role: GroupRole; share: number }[];
  split: boolean;
  /** llm, embedding, reranking, ... (as the node that has its file reads it); null when no node says. */
  type: string | null;
  /** What it can be asked beyond text ("tools", "vision") as every holder says alike; null when they do not. */
  caps: string[] | null;
  quant: string | null;
  sizeBytes: number;
  needBytes: number;
  /** Where it came from: its reference, its source URL, or null for a file put in a models dir. */
  origin: string | null;
  nodesOnDisk: string[];
  /** This node has its file: load, unload and pin here act on it. */
  onThisNode: boolean;
  loadedHere: boolean;
  pinned: boolean;
}

export interface ConsoleState {
  version: string;
  /** This node's id; null until its mesh endpoint is up. */
  self: string | null;
  /** When the state was taken, ms since the epoch (this node's clock). */
  at: number;
  nodes: ConsoleNode[];
  models: ConsoleModel[];
  /**
   * This node's roster: `unanchored` (it holds none: every member may be elected host), one of the
   * owner's machines, or a guest (refused: why its own pass no longer stands).
   */
  trust: { state: "unanchored" | "vouched" | "guest"; roster: string | null; closed: boolean; refused: string | null };
}

/** Cumulative counters of this node at `at`; the page draws rates from consecutive samples. */
export interface TrafficSample {
  at: number;
  /** Requests answered, tokens in and out, and time to first byte (sum and count) per model. */
  models: Record<string, { requests: number; tokensIn: number; tokensOut: number; ttftSumS: number; ttftCount: number }>;
  /** Requests this node sent to each peer, and tunnel bytes with it, by the peer's short id (`ConsoleNode.shortId`). */
  peers: Record<string, { forwarded: number; tunnelIn: number; tunnelOut: number }>;
  /** Moved conversations' KV caches: asked of members (fetched and restored, none to give, read again instead, failed), bytes each way, reading time saved. */
  kv?: { hits: number; misses: number; declined: number; failed: number; fetchedBytes: number; sentBytes: number; savedS: number };
}

export type LogLevel = "debug" | "info" | "warn" | "error";

export interface LogLine {
  /** Increases by one per line, so the page can tell a line it has from a new one. */
  seq: number;
  at: number;
  level: LogLevel;
  msg: string;
  fields: Record<string, string | number | boolean | null>;
}

export interface ConsoleHello {
  state: ConsoleState;
  traffic: TrafficSample[];
  logs: LogLine[];
}

/** The events of `/api/console/events`, by name; each `data` is one JSON value. */
export interface ConsoleEvents {
  hello: ConsoleHello;
  state: ConsoleState;
  traffic: TrafficSample;
  log: LogLine;
}
