import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { decideLine, LineError, MEMBERS_KEPT, MESH_LINE_FILE, readRememberedMesh, rememberMesh, toRemember, type LineDecision, type LineInputs } from "../../mesh/mesh-line.ts";
import { relayShown } from "../../mesh/status.ts";

const OWN = ["https://relay.example.org/"];
const VIA = { nodeId: "ab".repeat(32), addresses: ["192.0.2.1:4433"] };
const OLD_VIA = { nodeId: "cd".repeat(32), addresses: ["192.0.2.2:4433"] };
const none: LineInputs = { asked: undefined, askedRelay: undefined, token: undefined, remembered: undefined, member: false };

describe("which line a start runs, and with which relays", () => {
  const cases: [string, Partial<LineInputs>, LineDecision][] = [
    ["a new node founds its mesh on iroh1", {}, { line: "iroh1", relay: "default", by: "default" }],
    ["--transport chooses the line of a new mesh", { asked: "iroh035" }, { line: "iroh035", relay: "default", by: "flag" }],
    ["a token that names no line is a 0.35 mesh's: the joiner follows it", { token: { addr: VIA } }, { line: "iroh035", relay: "default", by: "token", via: VIA }],
    ["a token of an iroh1 mesh", { token: { addr: VIA, line: "iroh1" } }, { line: "iroh1", relay: "default", by: "token", via: VIA }],
    ["a token's relays are used when --relay says nothing", { token: { addr: VIA, line: "iroh1", relays: OWN } }, { line: "iroh1", relay: OWN, by: "token", relaysFrom: "token", via: VIA, meshRelays: OWN }],
    ["--relay wins over the token's relays (which stay the mesh's own)", { token: { addr: VIA, line: "iroh1", relays: OWN }, askedRelay: "disabled" }, { line: "iroh1", relay: "disabled", by: "token", via: VIA, meshRelays: OWN }],
    ["--transport that agrees with the token", { asked: "iroh035", token: { addr: VIA } }, { line: "iroh035", relay: "default", by: "token", via: VIA }],
    ["a token wins over what the state dir remembers (the mesh moved, or another mesh)", { token: { addr: VIA, line: "iroh1" }, remembered: { line: "iroh035", via: OLD_VIA }, member: true }, { line: "iroh1", relay: "default", by: "token", via: VIA }],
    ["a restart without a token comes back on the remembered line, through the remembered member", { remembered: { line: "iroh035", via: OLD_VIA }, member: true }, { line: "iroh035", relay: "default", by: "remembered", via: OLD_VIA }],
    ["... with the relays its token carried", { remembered: { line: "iroh1", relays: OWN }, member: true }, { line: "iroh1", relay: OWN, by: "remembered", relaysFrom: "state dir", meshRelays: OWN }],
    ["--transport given to a member of the other line moves its mesh (the old line's member is not dialed)", { asked: "iroh1", remembered: { line: "iroh035", via: OLD_VIA }, member: true }, { line: "iroh1", relay: "default", by: "flag", movedFrom: "iroh035" }],
    ["a founder restarted without a token dials the members it knew at its last stop", { remembered: { line: "iroh1", members: [VIA, OLD_VIA] }, member: true }, { line: "iroh1", relay: "default", by: "remembered", members: [VIA, OLD_VIA] }],
    ["... but not across a move (they run the old line)", { asked: "iroh035", remembered: { line: "iroh1", members: [VIA] }, member: true }, { line: "iroh035", relay: "default", by: "flag", movedFrom: "iroh1" }],
    ["... nor beside a token, which names the mesh now", { token: { addr: VIA, line: "iroh1" }, remembered: { line: "iroh1", members: [OLD_VIA] }, member: true }, { line: "iroh1", relay: "default", by: "token", via: VIA }],
    ["a move leaves the old line's relays behind", { asked: "iroh035", remembered: { line: "iroh1", relays: OWN }, member: true }, { line: "iroh035", relay: "default", by: "flag", movedFrom: "iroh1" }],
    ["--transport that agrees with the remembered line moves nothing", { asked: "iroh1", remembered: { line: "iroh1", via: OLD_VIA }, member: true }, { line: "iroh1", relay: "default", by: "flag", via: OLD_VIA }],
    ["a state dir from before lines were remembered, with no token to read, belongs to a 0.35 mesh", { member: true }, { line: "iroh035", relay: "default", by: "legacy state" }],
    ["... and --transport iroh1 moves it", { member: true, asked: "iroh1" }, { line: "iroh1", relay: "default", by: "flag", movedFrom: "iroh035" }],
    ["... one whose last token names iroh1 stays there", { member: true, legacyLine: "iroh1" }, { line: "iroh1", relay: "default", by: "legacy state" }],
    ["... and --transport iroh1 given again moves nothing", { member: true, legacyLine: "iroh1", asked: "iroh1" }, { line: "iroh1", relay: "default", by: "flag" }],
    ["a start told --relay disabled for once still remembers the mesh's own relays", { remembered: { line: "iroh1", relays: OWN }, member: true, askedRelay: "disabled" }, { line: "iroh1", relay: "disabled", by: "remembered", meshRelays: OWN }],
    ["relays given now as URLs are the mesh's own", { askedRelay: OWN }, { line: "iroh1", relay: OWN, by: "default", meshRelays: OWN }],
  ];
  test.each(cases)("%s", (_, inputs, expected) => expect(decideLine({ ...none, ...inputs })).toEqual(expected));

  const refused: [string, Partial<LineInputs>, RegExp][] = [
    ["--transport against the token's line names both", { asked: "iroh1", token: { addr: VIA } }, /this join token is for a mesh on iroh035, and --transport says iroh1: leave --transport out/],
    ["... and names where the line was set", { asked: "iroh1", askedFrom: "MESH_TRANSPORT", token: { addr: VIA } }, /and MESH_TRANSPORT says iroh1: leave MESH_TRANSPORT out/],
    ["... either way", { asked: "iroh035", token: { addr: VIA, line: "iroh1" } }, /for a mesh on iroh1, and --transport says iroh035/],
    ["relays of one's own on a new 0.35 mesh", { asked: "iroh035", askedRelay: OWN }, /relays of your own \(--relay URL\) need --transport iroh1/],
    ["relays of one's own on a remembered 0.35 mesh", { remembered: { line: "iroh035" }, member: true, askedRelay: OWN }, /need --transport iroh1/],
    ["relays of one's own with a 0.35 token", { token: { addr: VIA }, askedRelay: OWN }, /need --transport iroh1/],
  ];
  test.each(refused)("refused: %s", (_, inputs, message) => {
    expect(() => decideLine({ ...none, ...inputs })).toThrow(LineError);
    expect(() => decideLine({ ...none, ...inputs })).toThrow(message);
  });

  test("what is remembered: the line, relays only when they are the mesh's own, the member to join through", () => {
    expect(toRemember({ line: "iroh1", relay: OWN, by: "token", via: VIA, meshRelays: OWN })).toEqual({ line: "iroh1", relays: OWN, via: VIA });
    expect(toRemember({ line: "iroh1", relay: "disabled", by: "remembered", meshRelays: OWN })).toEqual({ line: "iroh1", relays: OWN });
    // At a stop, the members known then, at most MEMBERS_KEPT of them.
    const many = Array.from({ length: MEMBERS_KEPT + 5 }, (_, n) => ({ nodeId: n.toString(16).padStart(64, "0"), addresses: [] }));
    expect(toRemember({ line: "iroh1", relay: "default", by: "default" }, many).members).toEqual(many.slice(0, MEMBERS_KEPT));
    expect(toRemember({ line: "iroh1", relay: "disabled", by: "flag" })).toEqual({ line: "iroh1" });
    expect(toRemember({ line: "iroh035", relay: "default", by: "legacy state" })).toEqual({ line: "iroh035" });
  });
});

describe("the state dir's memory of the mesh", () => {
  const dir = () => mkdtempSync(join(tmpdir(), "mesh-line-"));

  test("written private, read back; nothing there reads as nothing", () => {
    const d = dir();
    try {
      expect(readRememberedMesh(d)).toBeUndefined();
      rememberMesh(d, { line: "iroh1", relays: OWN, via: VIA });
      expect(statSync(join(d, MESH_LINE_FILE)).mode & 0o777).toBe(0o600);
      expect(readRememberedMesh(d)).toEqual({ line: "iroh1", relays: OWN, via: VIA });
    } finally {
      rmSync(d, { recursive: true, force: true });
    }
  });

  test.each([["not JSON", "{"], ["an unknown line", '{"line":"iroh2"}'], ["a relay that is not http(s)", '{"line":"iroh1","relays":["file:///etc/passwd"]}'], ["a member address past its bounds", `{"line":"iroh1","via":{"nodeId":"${"a".repeat(200)}","addresses":[]}}`], ["more members than are kept", JSON.stringify({ line: "iroh1", members: Array.from({ length: MEMBERS_KEPT + 1 }, () => VIA) })]])("a file that is not ours (%s) is an error that says what to do", (_, text) => {
    const d = dir();
    try {
      writeFileSync(join(d, MESH_LINE_FILE), text);
      expect(() => readRememberedMesh(d)).toThrow(/is not what mesh wrote there .*remove it, and start with --join <token> or --transport <line>/);
    } finally {
      rmSync(d, { recursive: true, force: true });
    }
  });
});

test.each([
  ["disabled stays disabled, whatever iroh says", "disabled", "https://r/", "disabled"],
  ["the home relay once there is one", "default", "https://r/", "https://r/"],
  ["default before iroh's relays answer", "default", undefined, "default"],
  ["the mesh's own relays before one answers", ["https://a/", "https://b/"], undefined, "https://a/ https://b/"],
] as const)("relay shown: %s", (_, setting, home, shown) => expect(relayShown(typeof setting === "string" ? setting : [...setting], home)).toBe(shown));
