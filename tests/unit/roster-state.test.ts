/**
 * The roster in a state dir and in a running node (issue 42): what a token's roster makes of the
 * keys held, the verbs the CLI runs (found, issue, revoke, close, init, rotate), the node reading
 * what the CLI wrote, statements learnt from peers only when the roster signed them, and the two
 * kinds of token.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { guestRows } from "../../commands/guests.ts";
import { createLog } from "../../base/log.ts";
import { decodeJoinToken, encodeJoinToken, type JoinToken, type TokenRoster } from "../../mesh/join-token.ts";
import { readRosterKeys, readRosterLog, ROSTER_FILE, ROSTER_LOG_FILE } from "../../mesh/roster-files.ts";
import { closeToPassless, foundRoster, guestToken, initRoster, issueGuestPass, joinRoster, keysAfterJoin, revokeGuest, RosterError, rotateRoster } from "../../mesh/roster-setup.ts";
import { RosterState } from "../../mesh/roster-state.ts";
import { closeRoster, issuePass, newSecretKey, ownClaim, publicKeyOf, revokePass, type RosterKeys } from "../../mesh/roster.ts";
import { nodeIdOf } from "../../mesh/transport.ts";

const log = createLog("text", () => undefined);
const dirs: string[] = [];
const stateDir = () => {
  const d = mkdtempSync(join(tmpdir(), "roster-"));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const secret = newSecretKey();
const roster = publicKeyOf(secret);
const otherSecret = newSecretKey();
const { pass, passSecret } = issuePass(secret, "bob", undefined);
const owner: TokenRoster = { kind: "owner", secret };
const guest: TokenRoster = { kind: "guest", roster, pass, passSecret };

describe("keys after joining with a token's roster", () => {
  const held = {
    none: undefined,
    owner: { roster, secret } as RosterKeys,
    guest: { roster, pass, passSecret } as RosterKeys,
    otherOwner: { roster: publicKeyOf(otherSecret), secret: otherSecret } as RosterKeys,
  };
  const newPass = issuePass(secret, "bob-2", undefined);
  test.each<[string, RosterKeys | undefined, TokenRoster, "keep" | "owner" | "guest"]>([
    ["nothing held, the owner's token: an owner's machine", held.none, owner, "owner"],
    ["nothing held, a guest's token: a guest", held.none, guest, "guest"],
    ["a guest given the owner's token: an owner's machine", held.guest, owner, "owner"],
    ["an owner's machine given a guest's token of its roster: kept (MESH_JOIN again at a restart)", held.owner, guest, "keep"],
    ["an owner's machine given the owner's token again: kept", held.owner, owner, "keep"],
    ["a guest given its own pass again: kept", held.guest, guest, "keep"],
    ["a guest given a new pass: the new one", held.guest, { kind: "guest", roster, pass: newPass.pass, passSecret: newPass.passSecret }, "guest"],
    ["an owner's machine of another (rotated) roster, a guest's token of this one: the token's", held.otherOwner, guest, "guest"],
  ])("%s", (_, keys, token, expected) => {
    const next = keysAfterJoin(keys, token);
    expect(next === undefined ? "keep" : next.secret ? "owner" : "guest").toBe(expected);
  });
});

describe("the verbs in a state dir", () => {
  test("a new mesh's roster is closed from its start, 0600; passes and revocations go into the log", async () => {
    const dir = stateDir();
    const keys = await foundRoster(dir, false);
    expect(statSync(join(dir, ROSTER_FILE)).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, ROSTER_LOG_FILE)).mode & 0o777).toBe(0o600);
    expect(readRosterKeys(dir)).toEqual(keys);
    expect(readRosterLog(dir).statements.map((s) => s.kind)).toEqual(["closed"]);
    const issued = await issueGuestPass(dir, "carol", Date.now() + 60_000);
    await issueGuestPass(dir, "carol", undefined);
    expect(await revokeGuest(dir, "carol")).toHaveLength(2);
    // A second revoke of the same name signs nothing new.
    await revokeGuest(dir, "carol");
    const kinds = readRosterLog(dir).statements.map((s) => s.kind);
    expect(kinds).toEqual(["closed", "pass", "pass", "revoke", "revoke"]);
    const rows = guestRows(readRosterLog(dir), Date.now());
    expect(rows.map((r) => [r.name, r.state])).toEqual([
      ["carol", "revoked"],
      ["carol", "revoked"],
    ]);
    expect(rows.some((r) => r.passId === issued.pass.id)).toBe(true);
    await expect(revokeGuest(dir, "nobody")).rejects.toThrow('no guest pass named "nobody"');
  });

  test("a guest's node and an unanchored one hold no roster key: they issue, revoke and close nothing", async () => {
    const unanchored = stateDir();
    await expect(issueGuestPass(unanchored, "x", undefined)).rejects.toThrow("holds no roster");
    const guestDir = stateDir();
    joinRoster(guestDir, guest);
    await expect(issueGuestPass(guestDir, "x", undefined)).rejects.toBeInstanceOf(RosterError);
    await expect(revokeGuest(guestDir, "bob")).rejects.toThrow("is a guest of its mesh");
    await expect(closeToPassless(guestDir)).rejects.toThrow("is a guest of its mesh");
  });

  test("init makes an open roster once, for a mesh that has a secret; rotate makes a new key, closed if the old one was", async () => {
    const dir = stateDir();
    await expect(initRoster(dir)).rejects.toThrow("belongs to no mesh yet");
    writeFileSync(join(dir, "mesh.secret"), "ab".repeat(32));
    const first = await initRoster(dir);
    expect(readRosterLog(dir).statements).toEqual([]);
    await expect(initRoster(dir)).rejects.toThrow("already holds a roster");
    await closeToPassless(dir);
    const second = await rotateRoster(dir);
    expect(second.roster).not.toBe(first.roster);
    expect(readRosterLog(dir).statements.map((s) => s.kind)).toEqual(["closed"]);
  });

  test("a guest's token carries the pass and the node's address, never the roster's key", async () => {
    const dir = stateDir();
    await foundRoster(dir, false);
    const base: JoinToken = { addr: { nodeId: nodeIdOf(newSecretKey()), addresses: ["127.0.0.1:1"] }, secret: newSecretKey(), roster: { kind: "owner", secret: readRosterKeys(dir)!.secret! } };
    const text = await guestToken(dir, base, "dave", undefined);
    const t = decodeJoinToken(text);
    expect(t.roster?.kind).toBe("guest");
    expect(t.addr).toEqual(base.addr);
    expect(text).not.toContain(Buffer.from(readRosterKeys(dir)!.secret!).toString("base64url"));
  });
});

describe("tokens", () => {
  const base: JoinToken = { addr: { nodeId: nodeIdOf(newSecretKey()), addresses: ["127.0.0.1:9"] }, secret: newSecretKey(), line: "iroh1" };
  test("an owner's and a guest's token round-trip; a plain one carries no roster", () => {
    expect(decodeJoinToken(encodeJoinToken({ ...base, roster: owner })).roster).toEqual(owner);
    expect(decodeJoinToken(encodeJoinToken({ ...base, roster: guest })).roster).toEqual(guest);
    expect(decodeJoinToken(encodeJoinToken(base)).roster).toBeUndefined();
  });
  const reencode = (over: Record<string, unknown>) => `mesh1${Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(encodeJoinToken({ ...base, roster: guest }).slice(5), "base64url").toString()), ...over })).toString("base64url")}`;
  test.each<[string, Record<string, unknown>, string]>([
    ["a pass key that is not the pass's", { g: { r: roster, p: pass, s: Buffer.from(newSecretKey()).toString("base64url") } }, "its pass key is not the pass's"],
    ["both kinds at once", { k: Buffer.from(secret).toString("base64url") }, "both an owner's and a guest's"],
    ["a roster key of the wrong length", { g: undefined, k: "AAAA" }, "roster key has the wrong length"],
  ])("refused: %s", (_, over, why) => expect(() => decodeJoinToken(reencode(over))).toThrow(why));
});

describe("a running node's roster", () => {
  const peer = nodeIdOf(newSecretKey());
  test("it reads what the CLI writes (a revocation), and a guest's verdict is taken back", async () => {
    const dir = stateDir();
    await foundRoster(dir, false);
    const keys = readRosterKeys(dir)!;
    const state = new RosterState(dir, log);
    const bobPass = await issueGuestPass(dir, "bob", undefined);
    expect(state.refresh()?.added.map((s) => s.kind)).toEqual(["pass"]);
    const verdict = state.judge(peer, ownClaim({ roster: keys.roster, pass: bobPass.pass, passSecret: bobPass.passSecret }, peer));
    expect(verdict).toMatchObject({ standing: "guest", name: "bob" });
    await revokeGuest(dir, "bob");
    expect(state.refresh()).toMatchObject({ keys: false, added: [{ kind: "revoke" }] });
    expect(state.recheck(verdict)).toEqual({ standing: "refused", why: "its pass bob was revoked" });
    // Nothing changed since: nothing to do.
    await state.settled();
    state.refresh();
    expect(state.refresh()).toBeUndefined();
  });

  test("statements from a peer: the roster's are kept, written down and new ones returned; one it did not sign is junk", async () => {
    const dir = stateDir();
    joinRoster(dir, { kind: "owner", secret });
    const state = new RosterState(dir, log);
    const revoke = revokePass(secret, pass.id, 1);
    expect(state.learn([revoke, closeRoster(secret, 1)])).toEqual({ added: [revoke, closeRoster(secret, 1)] });
    expect(state.learn([revoke])).toEqual({ added: [] });
    expect(state.learn([revokePass(otherSecret, pass.id, 2)])).toEqual({ bad: "a revoke statement the roster did not sign" });
    await state.settled();
    expect(readRosterLog(dir).statements.map((s) => s.kind)).toEqual(["revoke", "closed"]);
    expect(state.anchor()).toMatchObject({ closed: true });
  });

  test("passes issued go to the owner's machines only; revocations to guests too; nothing to a passless or unanchored peer", async () => {
    const dir = stateDir();
    joinRoster(dir, { kind: "owner", secret });
    const state = new RosterState(dir, log);
    state.learn([{ kind: "pass", pass }, revokePass(secret, "0".repeat(32), 1)]);
    expect(state.statementsFor({ standing: "vouched" }).map((s) => s.kind)).toEqual(["pass", "revoke"]);
    expect(state.statementsFor({ standing: "guest", name: "bob", passId: pass.id }).map((s) => s.kind)).toEqual(["revoke"]);
    expect(state.statementsFor({ standing: "guest" })).toEqual([]);
    expect(state.statementsFor({ standing: "member" })).toEqual([]);
  });

  test("its own standing: unanchored, an owner's machine, or a guest whose pass was revoked", async () => {
    const dir = stateDir();
    expect(new RosterState(dir, log).own(peer)).toEqual({ state: "unanchored" });
    joinRoster(dir, guest);
    const state = new RosterState(dir, log);
    expect(state.own(peer)).toMatchObject({ state: "guest", name: "bob" });
    state.learn([revokePass(secret, pass.id, 1)]);
    expect(state.own(peer)).toMatchObject({ state: "guest", refused: "its pass bob was revoked" });
    joinRoster(dir, owner);
    state.refresh();
    expect(state.own(peer)).toMatchObject({ state: "vouched" });
    expect(state.claim(peer)?.vouch).toBeDefined();
  });
});
