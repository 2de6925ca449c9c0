/**
 * A rogue member's HTTP over the mesh: the request head a node's forwarder sends (the forwarding
 * marker included), but to any method, path and headers a test names, and the raw answer; and the
 * other way, its answer to a request the node forwards to it, whatever a test makes it.
 */
import { encodeFrame, readFrame, StreamKind } from "../streams/wire.ts";
import type { RogueMembership } from "./rogue-peer.ts";
import type { Stream } from "../streams/stream.ts";
import { withDeadline } from "./wait.ts";
import { FORWARDED_HEADER } from "../mesh/mesh-headers.ts";

export type RogueAnswer = { status: number; headers: Record<string, string>; body: string } | { reset: string };

export interface RogueRequest {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

async function exchange(member: RogueMembership, req: RogueRequest): Promise<RogueAnswer> {
  const stream = await member.openStream(StreamKind.HTTP);
  const head = encodeFrame({ method: req.method, path: req.path, headers: { "content-type": "application/json", [FORWARDED_HEADER]: "1", ...req.headers } });
  // The node may answer (a refusal) and stop reading before all of it is sent: the answer still counts.
  await stream.send.writeAll(Buffer.concat([head, new TextEncoder().encode(req.body ?? "")])).catch(() => undefined);
  await stream.send.finish().catch(() => undefined);
  let answer: { status: number; headers?: Record<string, string> } | null;
  try {
    answer = (await readFrame(stream.recv)) as typeof answer;
  } catch (err) {
    return { reset: (err as Error).message };
  }
  if (!answer) return { reset: "the stream ended without an answer" };
  const parts: Uint8Array[] = [];
  const buf = new Uint8Array(64 * 1024);
  for (;;) {
    const n = await stream.recv.read(buf).catch(() => null);
    if (n === null) break;
    parts.push(buf.slice(0, n));
  }
  return { status: answer.status, headers: answer.headers ?? {}, body: Buffer.concat(parts).toString("utf8") };
}

/** Sends `req` over a fresh HTTP stream and reads the whole answer (or how the node cut it off). */
export function rogueHttp(member: RogueMembership, req: RogueRequest, timeoutMs = 60_000): Promise<RogueAnswer> {
  return withDeadline(exchange(member, req), timeoutMs, `the node's answer to ${req.method} ${req.path}`);
}

/** How a rogue member answers a request the node sends it: a status and body, or never at all. */
export type RogueReply = { status: number; body: string | Uint8Array } | "silence";

/** Reads the node's request head on `stream` and answers it as `reply` says; the head it read. */
export async function serveRogueHttp(stream: Stream, reply: (head: { method: string; path: string }) => RogueReply): Promise<{ method: string; path: string } | undefined> {
  const head = (await readFrame(stream.recv).catch(() => null)) as { method: string; path: string } | null;
  if (!head) return undefined;
  const answer = reply(head);
  // Silent: the stream stays open, unanswered, until the node gives up on it.
  if (answer === "silence") return head;
  const body = typeof answer.body === "string" ? new TextEncoder().encode(answer.body) : answer.body;
  await stream.send.writeAll(Buffer.concat([encodeFrame({ status: answer.status, headers: { "content-type": "application/json" } }), body])).catch(() => undefined);
  await stream.send.finish().catch(() => undefined);
  return head;
}
