/**
 * A member's connection that failed under a request: what the request waits for before it goes once
 * more (`Replacements.afterFailure`), and the member dialed again at once when its connection ended
 * (`Redials.lostNow`). Connections are stand-ins here (only `closed` is read); the real ones are in
 * tests/unit/membership.test.ts and the mesh e2e files.
 */
import { describe, expect, test } from "bun:test";
import { Redials } from "../../mesh/redials.ts";
import { Replacements } from "../../mesh/replacements.ts";
import type { PeerConnection } from "../../mesh/transport.ts";
import type { MemberAddr } from "../../mesh/join-token.ts";
import { createLog } from "../../base/log.ts";

const PEER = "b".repeat(64);

function connection(closedWith?: string): PeerConnection {
  return {
    remoteId: PEER,
    closed: closedWith === undefined ? new Promise(() => undefined) : Promise.resolve(closedWith),
    openStream: () => Promise.reject(new Error("unused")),
    acceptStream: () => Promise.reject(new Error("unused")),
    rttMs: () => 1,
    close: () => undefined,
  };
}

describe("Replacements.afterFailure", () => {
  test.each([
    ["closed as a duplicate, the one kept admitted later: replaced", 'ApplicationClosed(ApplicationClose { error_code: 409, reason: b"duplicate connection" })', false, true],
    ["reset by the peer, the request reconnects, the member dialed again: replaced", "reset by peer", true, true],
    ["reset by the peer, the membership's own look (it does not wait): not replaced", "reset by peer", false, false],
    ["timed out (the peer is likely gone), even for a request: not replaced", "timed out", true, false],
  ] as const)("%s", async (_why, reason, reconnects, expected) => {
    const old = connection(reason);
    let now: PeerConnection | undefined = old;
    const replacements = new Replacements(() => now);
    const waited = replacements.afterFailure(PEER, old, { reconnects });
    // The new connection comes a moment later, as a dial's or the other side's handshake would.
    setTimeout(() => {
      now = connection();
      replacements.admitted();
    }, 400);
    expect(await waited).toBe(expected);
  });

  test("a connection already replaced when the failure is looked at: replaced, at once", async () => {
    const old = connection("timed out");
    const replacements = new Replacements(() => connection());
    expect(await replacements.afterFailure(PEER, old)).toBe(true);
  });
});

describe("Redials.lostNow", () => {
  const addr: MemberAddr = { nodeId: PEER, addresses: ["127.0.0.1:4433"] };
  function redials(o: { busy?: string[]; stopped?: boolean } = {}) {
    const dialed: string[] = [];
    const r = new Redials({
      dial: async (a) => void dialed.push(a.nodeId),
      alone: () => false,
      stopped: () => o.stopped ?? false,
      busy: () => o.busy ?? [],
      log: createLog("text", () => undefined),
    });
    return { r, dialed };
  }

  test.each([
    ["a remembered member no one is dialing: dialed at once", { remembered: true }, [PEER]],
    ["one never met: nothing to dial", { remembered: false }, []],
    ["one already connected again or being dialed: not twice", { remembered: true, busy: [PEER] }, []],
    ["a node stopping: nothing", { remembered: true, stopped: true }, []],
  ] as const)("%s", (_why, o, expected) => {
    const { r, dialed } = redials({ busy: "busy" in o ? [...o.busy] : [], stopped: "stopped" in o ? o.stopped : false });
    if (o.remembered) r.remembered.seen(addr);
    r.lostNow(PEER);
    expect(dialed).toEqual([...expected]);
  });

  test("dialed at once, then on the ticks' growing pause, not again at once", () => {
    const { r, dialed } = redials();
    r.remembered.seen(addr);
    r.lostNow(PEER, 1_000);
    r.due(1_000 + 100);
    expect(dialed).toEqual([PEER]);
    r.due(1_000 + 600);
    expect(dialed).toEqual([PEER, PEER]);
  });
});
