/**
 * The roster's signatures (issue 42) and the verdicts a node gives its peers from them: a vouch
 * holds for its own node id only, a pass for the roster that signed it and the node it is bound to,
 * unrevoked and unexpired; a node that holds no roster judges nobody (an unanchored mesh, as before).
 */
import { describe, expect, test } from "bun:test";
import { judgePeer, stillStands, type Anchor, type Verdict } from "../../mesh/peer-standing.ts";
import { bindPass, bindingHolds, closeRoster, issuePass, newSecretKey, ownClaim, passHolds, publicKeyOf, revokePass, statementHolds, statementKey, vouchFor, vouchHolds, type TrustClaim } from "../../mesh/roster.ts";
import { nodeIdOf } from "../../mesh/transport.ts";

const rosterSecret = newSecretKey();
const roster = publicKeyOf(rosterSecret);
const otherSecret = newSecretKey();
const other = publicKeyOf(otherSecret);
const nodeA = nodeIdOf(newSecretKey());
const nodeB = nodeIdOf(newSecretKey());
const NOW = 1_800_000_000_000;

describe("signatures", () => {
  test("a vouch holds for the id it names, under the roster that made it, and nothing else", () => {
    const v = vouchFor(rosterSecret, nodeA);
    expect(vouchHolds(roster, nodeA, v)).toBe(true);
    expect(vouchHolds(roster, nodeB, v)).toBe(false);
    expect(vouchHolds(other, nodeA, v)).toBe(false);
    expect(vouchHolds(roster, nodeA, vouchFor(otherSecret, nodeA))).toBe(false);
  });

  test("a pass holds as signed; any field changed does not; a binding holds for its node only", () => {
    const { pass, passSecret } = issuePass(rosterSecret, "mallory", NOW + 1000);
    expect(passHolds(roster, pass)).toBe(true);
    expect(passHolds(other, pass)).toBe(false);
    for (const changed of [{ name: "alice" }, { expiresAt: NOW + 2000 }, { id: "0".repeat(32) }, { key: nodeA }]) expect(passHolds(roster, { ...pass, ...changed })).toBe(false);
    const { expiresAt: _, ...forever } = pass;
    expect(passHolds(roster, forever)).toBe(false);
    const bind = bindPass(passSecret, roster, pass.id, nodeA);
    expect(bindingHolds(roster, pass, nodeA, bind)).toBe(true);
    expect(bindingHolds(roster, pass, nodeB, bind)).toBe(false);
    // Bound with a key that is not the pass's.
    expect(bindingHolds(roster, pass, nodeA, bindPass(newSecretKey(), roster, pass.id, nodeA))).toBe(false);
  });

  test("a pass's name is refused when a terminal could read it as more than a name", () => {
    for (const bad of ["", "has space", "new\nline", "\x1b[2J", "a".repeat(65), "-leading"]) expect(() => issuePass(rosterSecret, bad, undefined)).toThrow("a guest's name");
  });

  test("statements hold under their roster; a signature of one kind is none of another", () => {
    const revoke = revokePass(rosterSecret, "1".repeat(32), NOW);
    const closed = closeRoster(rosterSecret, NOW);
    const { pass } = issuePass(rosterSecret, "bob", undefined);
    for (const s of [revoke, closed, { kind: "pass" as const, pass }]) {
      expect(statementHolds(roster, s)).toBe(true);
      expect(statementHolds(other, s)).toBe(false);
    }
    expect(statementHolds(roster, { ...revoke, passId: "2".repeat(32) })).toBe(false);
    expect(statementHolds(roster, { kind: "closed", at: revoke.at, sig: revoke.sig })).toBe(false);
    expect(new Set([revoke, closed, { kind: "pass" as const, pass }].map(statementKey)).size).toBe(3);
  });
});

describe("a peer's standing", () => {
  const { pass, passSecret } = issuePass(rosterSecret, "mallory", NOW + 60_000);
  const otherPass = issuePass(otherSecret, "mallory", undefined);
  const vouched = ownClaim({ roster, secret: rosterSecret }, nodeA);
  const guest = ownClaim({ roster, pass, passSecret }, nodeA);
  const closed: Anchor = { roster, closed: true, revoked: new Set() };
  const open: Anchor = { ...closed, closed: false };
  const cases: [string, Anchor | undefined, string, TrustClaim | undefined, Verdict | string][] = [
    ["a node without a roster judges nobody: a member, whatever it shows", undefined, nodeA, undefined, { standing: "member" }],
    ["...even a claim of another roster", undefined, nodeA, { roster: other }, { standing: "member" }],
    ["an owner's machine's vouch", closed, nodeA, vouched, { standing: "vouched" }],
    ["a vouch replayed under another id", closed, nodeB, vouched, "copied vouch proves nothing"],
    ["a vouch of another roster", closed, nodeA, ownClaim({ roster: other, secret: otherSecret }, nodeA), "another roster"],
    ["a guest's bound pass", closed, nodeA, guest, { standing: "guest", name: "mallory", passId: pass.id, expiresAt: NOW + 60_000 }],
    ["a pass replayed under another id", closed, nodeB, guest, "bound to another node"],
    ["a pass signed by another roster, shown under this one", closed, nodeA, { roster, pass: otherPass.pass, bind: bindPass(otherPass.passSecret, roster, otherPass.pass.id, nodeA) }, "not signed by this mesh's roster"],
    ["a pass without its binding", closed, nodeA, { roster, pass }, "neither a vouch nor a bound pass"],
    ["the roster named, nothing shown", closed, nodeA, { roster }, "neither a vouch nor a bound pass"],
    ["nothing shown, the roster closed", closed, nodeA, undefined, "admits only its owner's machines and guests with a pass"],
    ["nothing shown, the roster open (an older peer)", open, nodeA, undefined, { standing: "guest" }],
    ["a revoked pass", { ...closed, revoked: new Set([pass.id]) }, nodeA, guest, "pass mallory was revoked"],
  ];
  test.each(cases)("%s", (_, anchor, peer, claim, expected) => {
    const v = judgePeer(anchor, peer, claim, NOW);
    if (typeof expected === "string") expect(v.standing === "refused" && v.why).toContain(expected);
    else expect(v).toEqual(expected);
  });

  test("an expired pass is refused at admission, and a verdict given before is taken back once it expires", () => {
    expect(judgePeer(closed, nodeA, guest, NOW + 60_000)).toEqual({ standing: "refused", why: `its pass mallory expired at ${new Date(NOW + 60_000).toISOString().replace(/\.\d+Z$/, "Z")}` });
    const given = judgePeer(closed, nodeA, guest, NOW);
    expect(stillStands(closed, given, NOW + 59_999)).toEqual(given);
    expect(stillStands(closed, given, NOW + 60_001).standing).toBe("refused");
  });

  test("a verdict given before is taken back by a revocation, and a passless guest by the roster closing; an owner's machine stays", () => {
    const given = judgePeer(closed, nodeA, guest, NOW);
    expect(stillStands({ ...closed, revoked: new Set([pass.id]) }, given, NOW)).toEqual({ standing: "refused", why: "its pass mallory was revoked" });
    expect(stillStands(closed, { standing: "guest" }, NOW).standing).toBe("refused");
    expect(stillStands(open, { standing: "guest" }, NOW)).toEqual({ standing: "guest" });
    expect(stillStands({ ...closed, revoked: new Set([pass.id]) }, { standing: "vouched" }, NOW)).toEqual({ standing: "vouched" });
    expect(stillStands(undefined, given, NOW + 10 ** 9)).toEqual(given);
  });
});
