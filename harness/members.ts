/**
 * A real `Membership` over a real iroh endpoint on loopback (relays off), in the test's own
 * process, announcing what the test gives it: membership at its seam, without a node, and members
 * of a mesh that cost no process each.
 */
import { randomBytes } from "node:crypto";
import { createLog } from "../base/log.ts";
import { Membership } from "../mesh/membership.ts";
import type { Announcement } from "../mesh/messages.ts";
import { Transport } from "../mesh/transport.ts";
import type { Stream } from "../streams/stream.ts";
import { fakeAnnouncement } from "./rogue-peer.ts";
import { TEST_LINE } from "./node.ts";

export interface Member {
  m: Membership;
  t: Transport;
  mine: Announcement;
  changes: number;
  streams: { from: string; kind: number }[];
  /** Its log lines (JSON), to read why it dropped a peer. */
  lines: string[];
}

export interface MemberOptions {
  secret: Uint8Array;
  heartbeatMs?: number;
  peerTimeoutMs?: number;
  /** Its identity (random where none is given). */
  secretKey?: Uint8Array;
  /** Fields of its announcement over `fakeAnnouncement`'s (e.g. `beats` and `ring`, as a node of today announces). */
  announce?: Partial<Announcement>;
}

export async function startMember(o: MemberOptions): Promise<Member> {
  let m: Membership | undefined;
  const lines: string[] = [];
  const log = createLog("json", (line) => void lines.push(line));
  const t = await Transport.bind({ secretKey: o.secretKey ?? Uint8Array.from(randomBytes(32)), ipv4Addr: "127.0.0.1:0", ipv6Addr: "[::1]:0", relay: "disabled", line: TEST_LINE, log, onConnection: (conn) => void m?.accept(conn) });
  const x: Member = { m: undefined as never, t, mine: { ...fakeAnnouncement(t.nodeId), addresses: t.addr().addresses, ...o.announce }, changes: 0, streams: [], lines };
  m = new Membership({
    transport: t,
    secret: o.secret,
    // Where the endpoint is now, as a node's announcement says it (an endpoint bound again moves).
    announcement: () => ({ ...x.mine, addresses: t.addr().addresses }),
    log,
    heartbeatMs: o.heartbeatMs ?? 500,
    peerTimeoutMs: o.peerTimeoutMs ?? 10_000,
    onChange: () => void x.changes++,
    onStream: (from: string, kind: number, stream: Stream) => {
      x.streams.push({ from, kind });
      void stream.send.reset(0).catch(() => undefined);
    },
  });
  x.m = m;
  return x;
}

export async function stopMember(x: Member): Promise<void> {
  await x.m.leave();
  await x.t.close();
}

/** Why `x` dropped the member `peerId`, as its log says (its first drop of it). */
export function whyDropped(x: Member, peerId: string): string | undefined {
  return x.lines.map((l) => JSON.parse(l) as { msg: string; peer?: string; reason?: string }).find((l) => l.msg === "peer left" && l.peer === peerId.slice(0, 10))?.reason;
}
