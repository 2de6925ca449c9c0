/**
 * The two sides of a member's handshake on a new connection, each read under a deadline: the
 * dialer opens the control stream with its nonce, the acceptor answers with its own and its proof
 * of the mesh secret, the dialer proves it back (before checking the acceptor's, so a member whose
 * secret differs sees the failure too), then hellos cross. The acceptor judges the dialer's
 * standing under the roster and its iroh line before it says hello, so a peer of the other line,
 * or one the roster refuses, never takes it for a member even for a moment. What is proved and
 * judged comes back; `membership.ts` admits the peer, or closes the connection saying why.
 */
import { authMac, MAC_BYTES, NONCE_BYTES, newNonce, verifyMac, type AuthContext } from "./auth.ts";
import type { MemberAddr } from "./join-token.ts";
import { ControlMessageSchema, PROTOCOL_VERSION, type Announcement, type ControlMessage } from "./messages.ts";
import type { Standing } from "./peer-standings.ts";
import type { TrustClaim } from "./roster.ts";
import { LEGACY_LINE, type PeerConnection, type Stream } from "./transport.ts";
import { readFrame, StreamKind, WireError, writeFrame } from "../streams/wire.ts";

/** Each step of a handshake must come within this. */
export const AUTH_DEADLINE_MS = 5_000;

/** The peer did not prove the mesh secret, or runs the other iroh line. */
export class AuthError extends Error {}
export class TimeoutError extends Error {}

export function withDeadline<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: Timer | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(`${what} took longer than ${ms} ms`)), ms);
  });
  return Promise.race([p, deadline]).finally(() => clearTimeout(timer));
}

export type Hello = Extract<ControlMessage, { type: "hello" }>;

/** What a handshake needs of this node. */
export interface HandshakeParts {
  secret: Uint8Array;
  selfId: string;
  /** Our announcement as it is now (our hello's). */
  announcement: () => Announcement;
  /** The members our hello names. */
  members: () => MemberAddr[];
  /** The peer's standing under the roster, from its claim; throws `RefusedError` when the roster does not admit it. */
  admit: (peerId: string, claim: TrustClaim | undefined) => Standing;
}

export interface Handshaken {
  control: Stream;
  hello: Hello;
  standing: Standing;
}

/** The dialer's side, on a connection it dialed. Throws on anything that is not a member's handshake. */
export async function dialerHandshake(conn: PeerConnection, p: HandshakeParts): Promise<Handshaken> {
  const control = await conn.openStream();
  const dialerNonce = newNonce();
  const opening = new Uint8Array(1 + NONCE_BYTES);
  opening[0] = StreamKind.CONTROL;
  opening.set(dialerNonce, 1);
  await control.send.writeAll(opening);
  const reply = new Uint8Array(NONCE_BYTES + MAC_BYTES);
  await withDeadline(control.recv.readExact(reply), AUTH_DEADLINE_MS, "the member's proof");
  const ctx: AuthContext = { secret: p.secret, dialerId: p.selfId, acceptorId: conn.remoteId, dialerNonce, acceptorNonce: reply.slice(0, NONCE_BYTES) };
  // Our proof goes out before we check theirs, so a member whose secret differs sees the failure too.
  await control.send.writeAll(authMac("dialer", ctx));
  if (!verifyMac("acceptor", ctx, reply.subarray(NONCE_BYTES))) throw new AuthError("the member could not prove the mesh secret (is the token from this mesh?)");
  await sendHello(control, p);
  const raw = await withDeadline(readFrame(control.recv), AUTH_DEADLINE_MS, "the member's hello");
  sameLine(raw, p);
  const hello = helloOf(raw);
  return { control, hello, standing: p.admit(conn.remoteId, hello.announcement.trust) };
}

/** The acceptor's side, on a connection someone dialed to us: their proof first, then ours. */
export async function acceptorHandshake(conn: PeerConnection, p: HandshakeParts): Promise<Handshaken> {
  const control = await withDeadline(conn.acceptStream(), AUTH_DEADLINE_MS, "the peer's first stream");
  const opening = new Uint8Array(1 + NONCE_BYTES);
  await withDeadline(control.recv.readExact(opening), AUTH_DEADLINE_MS, "the peer's opening");
  if (opening[0] !== StreamKind.CONTROL) throw new AuthError(`first stream of kind ${opening[0]} before authentication`);
  const acceptorNonce = newNonce();
  const ctx: AuthContext = { secret: p.secret, dialerId: conn.remoteId, acceptorId: p.selfId, dialerNonce: opening.slice(1), acceptorNonce };
  const reply = new Uint8Array(NONCE_BYTES + MAC_BYTES);
  reply.set(acceptorNonce, 0);
  reply.set(authMac("acceptor", ctx), NONCE_BYTES);
  await control.send.writeAll(reply);
  const mac = new Uint8Array(MAC_BYTES);
  await withDeadline(control.recv.readExact(mac), AUTH_DEADLINE_MS, "the peer's proof");
  if (!verifyMac("dialer", ctx, mac)) throw new AuthError("the peer could not prove the mesh secret");
  const raw = await withDeadline(readFrame(control.recv), AUTH_DEADLINE_MS, "the peer's hello");
  // Before our hello: a node of the other line, or one the roster refuses, must not take us for a member even for a moment.
  sameLine(raw, p);
  const hello = helloOf(raw);
  const standing = p.admit(conn.remoteId, hello.announcement.trust);
  await sendHello(control, p);
  return { control, hello, standing };
}

async function sendHello(control: Stream, p: HandshakeParts): Promise<void> {
  await writeFrame(control.send, { v: PROTOCOL_VERSION, type: "hello", announcement: p.announcement(), members: p.members() });
}

/**
 * Refuses a peer of the other iroh line: 0.35 reaches 1.x (not the other way), and an older node
 * given a token of a 1.x mesh would otherwise join it half-way.
 */
function sameLine(raw: unknown, p: HandshakeParts): void {
  const theirs = (raw as { announcement?: { transport?: unknown } } | null)?.announcement?.transport ?? LEGACY_LINE;
  const ours = p.announcement().transport ?? LEGACY_LINE;
  if (theirs !== ours) throw new AuthError(`the peer runs ${String(theirs).slice(0, 16)} and this node runs ${ours}: a mesh runs one iroh line (--transport)`);
}

function helloOf(raw: unknown): Hello {
  const hello = parseMessage(raw);
  if (hello.type !== "hello") throw new WireError(`expected hello, got ${hello.type}`);
  return hello;
}

/** A control message read through its schema; junk throws `WireError` (the peer is dropped for it). */
export function parseMessage(raw: unknown): ControlMessage {
  const parsed = ControlMessageSchema.safeParse(raw);
  if (!parsed.success) throw new WireError(`control message of the wrong shape: ${parsed.error.issues[0]?.message ?? "invalid"}`);
  return parsed.data;
}
