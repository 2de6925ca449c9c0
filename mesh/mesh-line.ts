/**
 * Which iroh line this node's mesh runs, and with which relays: a joiner follows its token, a node
 * restarted without one comes back as the state dir remembers its mesh (a systemd unit given no
 * flags), a new mesh is founded on iroh1, and `--transport` moves a node's mesh to the other line.
 * The two lines cannot reach each other, so the line is the mesh's, not a node's preference.
 *
 * What is remembered (`<state-dir>/mesh-line.json`): the line, the mesh's own relays (the ones its
 * token carried, `--relay URL`) and the member its token named, which a restart without `--join`
 * dials to find the mesh again. A state dir from before lines were remembered that holds a mesh
 * secret runs the line its last join token names (those named iroh1 only; 0.35 was the default).
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import type { MemberAddr } from "./join-token.ts";
import { MemberAddrSchema } from "./messages.ts";
import { writePrivateFile } from "../base/private-file.ts";
import { DEFAULT_LINE, LEGACY_LINE, TRANSPORT_LINES, type RelaySetting, type TransportLine } from "./transport.ts";

export const MESH_LINE_FILE = "mesh-line.json";
/** Members kept for a restart: enough to find a mesh whose nodes come and go. */
export const MEMBERS_KEPT = 16;

export interface RememberedMesh {
  line: TransportLine;
  /** The mesh's own relays, from its join token or `--relay URL` (iroh1 only). */
  relays?: string[];
  /** The member the node's join token named: dialed again by a restart given no token. */
  via?: MemberAddr;
  /** The members it knew when it last stopped (most recent first): a founder has no token to find them by. */
  members?: MemberAddr[];
}

export interface LineInputs {
  /** `--transport`, when the operator gave it (flag, environment or config file). */
  asked: TransportLine | undefined;
  /** Where `asked` came from, as an error names it (`--transport`, `MESH_TRANSPORT`, ...). */
  askedFrom?: string;
  /** `--relay`, when the operator gave it. */
  askedRelay: RelaySetting | undefined;
  /** The join token given at this start, if any. */
  token: { line?: TransportLine; relays?: string[]; addr: MemberAddr } | undefined;
  /** What the state dir remembers of the mesh, if anything. */
  remembered: RememberedMesh | undefined;
  /** Whether the state dir holds a mesh secret (the node belongs to a mesh already). */
  member: boolean;
  /** The line the join token this state dir's node last wrote names, when it wrote one. */
  legacyLine?: TransportLine;
}

export interface LineDecision {
  line: TransportLine;
  relay: RelaySetting;
  /** What decided the line, for the log. */
  by: "token" | "flag" | "remembered" | "legacy state" | "default";
  /** Where the relays came from, when they are the mesh's own and the operator did not give them now. */
  relaysFrom?: "token" | "state dir";
  /** The mesh's own relays, whether this start uses them or not. */
  meshRelays?: string[];
  /** The line the node's mesh ran before this start, when `--transport` moves it. */
  movedFrom?: TransportLine;
  /** The member to join through: the token's, else the remembered one (not across a move: it runs the old line). */
  via?: MemberAddr;
  /** More members to dial when there is no token: those known at the last stop, on this same line. */
  members?: MemberAddr[];
}

/** A combination that cannot start: the message names both sides and what to do. */
export class LineError extends Error {}

/** The line and relays for this start (pure). */
export function decideLine(i: LineInputs): LineDecision {
  const askedBy = i.askedFrom ?? "--transport";
  // The mesh's own relays: given now as URLs, else the token's, else remembered for this line.
  const relaysOf = (line: TransportLine, own: string[] | undefined, from: "token" | "state dir"): Pick<LineDecision, "relay" | "relaysFrom" | "meshRelays"> => {
    const mesh = Array.isArray(i.askedRelay) ? i.askedRelay : line === "iroh1" && own?.length ? own : undefined;
    const kept = mesh ? { meshRelays: mesh } : {};
    if (i.askedRelay !== undefined) return { relay: i.askedRelay, ...kept };
    return mesh ? { relay: mesh, relaysFrom: from, ...kept } : { relay: "default" };
  };
  let decision: LineDecision;
  if (i.token) {
    const line = i.token.line ?? LEGACY_LINE;
    if (i.asked !== undefined && i.asked !== line) {
      throw new LineError(`this join token is for a mesh on ${line}, and ${askedBy} says ${i.asked}: leave ${askedBy} out (a joiner follows its token's line), or join with a token of a mesh on ${i.asked}`);
    }
    decision = { line, by: "token", ...relaysOf(line, i.token.relays, "token"), via: i.token.addr };
  } else if (i.remembered) {
    const line = i.asked ?? i.remembered.line;
    decision = {
      line,
      by: i.asked !== undefined ? "flag" : "remembered",
      ...(line !== i.remembered.line ? { movedFrom: i.remembered.line } : {}),
      ...relaysOf(line, line === i.remembered.line ? i.remembered.relays : undefined, "state dir"),
      ...(line === i.remembered.line && i.remembered.via ? { via: i.remembered.via } : {}),
      ...(line === i.remembered.line && i.remembered.members?.length ? { members: i.remembered.members } : {}),
    };
  } else if (i.member) {
    // Before lines were remembered, the token a node wrote named its line when it was not 0.35.
    const was = i.legacyLine ?? LEGACY_LINE;
    const line = i.asked ?? was;
    decision = { line, by: i.asked !== undefined ? "flag" : "legacy state", ...(line !== was ? { movedFrom: was } : {}), ...relaysOf(line, undefined, "state dir") };
  } else {
    const line = i.asked ?? DEFAULT_LINE;
    decision = { line, by: i.asked !== undefined ? "flag" : "default", ...relaysOf(line, undefined, "state dir") };
  }
  if (Array.isArray(decision.relay) && decision.line !== "iroh1") {
    throw new LineError(`relays of your own (--relay URL) need --transport iroh1: the iroh ${decision.line === "iroh035" ? "0.35" : decision.line} binding cannot be given relays`);
  }
  return decision;
}

/**
 * What the state dir should remember (pure): the line, the mesh's own relays (kept through a start
 * told `--relay disabled` for once), the member to join through, and the members known (at a stop).
 */
export function toRemember(d: LineDecision, members: MemberAddr[] | undefined = d.members): RememberedMesh {
  return { line: d.line, ...(d.meshRelays ? { relays: d.meshRelays } : {}), ...(d.via ? { via: d.via } : {}), ...(members?.length ? { members: members.slice(0, MEMBERS_KEPT) } : {}) };
}

const Remembered = z.object({
  line: z.enum(TRANSPORT_LINES),
  relays: z
    .array(z.string().url().max(256).refine((u) => /^https?:\/\//.test(u)))
    .min(1)
    .max(8)
    .optional(),
  via: MemberAddrSchema.optional(),
  members: z.array(MemberAddrSchema).max(MEMBERS_KEPT).optional(),
});

/** What `stateDir` remembers, or undefined when it remembers nothing; a file that is not ours is an error that says so. */
export function readRememberedMesh(stateDir: string): RememberedMesh | undefined {
  const path = join(stateDir, MESH_LINE_FILE);
  if (!existsSync(path)) return undefined;
  let parsed;
  try {
    parsed = Remembered.safeParse(JSON.parse(readFileSync(path, "utf8")));
  } catch {
    parsed = undefined;
  }
  if (!parsed?.success) throw new LineError(`${path} is not what mesh wrote there (the line of this node's mesh); remove it, and start with --join <token> or --transport <line>`);
  return parsed.data;
}

/** Remembers the mesh's line and relays (0600: the relays are the mesh's own business). */
export function rememberMesh(stateDir: string, m: RememberedMesh): void {
  writePrivateFile(join(stateDir, MESH_LINE_FILE), `${JSON.stringify(m)}\n`);
}
