/**
 * Which members a node takes a conversation's KV from (`kv/recent-servers.ts`): those whose
 * announcements serve the model's content now, or did within `SERVED_LATELY_MS`, as heard at each
 * change of the members; never one that only has the model on disk, and never a member only named.
 */
import { describe, expect, test } from "bun:test";
import { RecentServers, SERVED_LATELY_MS } from "../../kv/recent-servers.ts";

const A = "a".repeat(64);
const B = "b".repeat(64);
const disk = (identity: string | undefined, name = "m") => ({ name, size: 1, need: 1, ref: undefined, ...(identity ? { identity } : {}) });
const serving = (...identities: string[]) => ({ serving: identities.map((_, i) => `m${i}`), modelsOnDisk: identities.map((id, i) => disk(id, `m${i}`)) });
const idle = (...identities: string[]) => ({ serving: [], modelsOnDisk: identities.map((id, i) => disk(id, `m${i}`)) });

type Members = Map<string, ReturnType<typeof serving>>;
/** A step: time passes, then the members as they are now. */
type Step = [advanceMs: number, members: Members];

function after(steps: Step[]): { recent: RecentServers; now: () => number } {
  let now = 1_000_000;
  const recent = new RecentServers(() => now);
  for (const [ms, members] of steps) {
    now += ms;
    recent.heard(members);
  }
  return { recent, now: () => now };
}

describe("RecentServers: whose KV of a content a node takes", () => {
  test.each<[string, Step[], string, string, boolean]>([
    ["serves it now", [[0, new Map([["p", serving(A)]])]], "p", A, true],
    ["serves another content", [[0, new Map([["p", serving(B)]])]], "p", A, false],
    ["has it on disk only, never served it", [[0, new Map([["p", idle(A)]])]], "p", A, false],
    ["serves a model whose content it has not worked out", [[0, new Map([["p", { serving: ["m"], modelsOnDisk: [disk(undefined)] }]])]], "p", A, false],
    ["was never heard of (a name in a header)", [[0, new Map([["p", serving(A)]])]], "q", A, false],
    ["served it for an hour, stopped a minute ago", [[0, new Map([["p", serving(A)]])], [60 * 60_000, new Map([["p", serving(A)]])], [1, new Map([["p", idle(A)]])], [60_000, new Map()]], "p", A, true],
    ["stopped serving it just over the window ago", [[0, new Map([["p", serving(A)]])], [1, new Map([["p", idle(A)]])], [SERVED_LATELY_MS + 1, new Map([["p", idle(A)]])]], "p", A, false],
    ["left the mesh while serving it, a minute ago", [[0, new Map([["p", serving(A)]])], [1, new Map()], [60_000, new Map()]], "p", A, true],
    ["left the mesh while serving it, over the window ago", [[0, new Map([["p", serving(A)]])], [1, new Map()], [SERVED_LATELY_MS + 1, new Map()]], "p", A, false],
    ["stopped one content and still serves another", [[0, new Map([["p", serving(A, B)]])], [1, new Map([["p", serving(B)]])], [SERVED_LATELY_MS + 1, new Map([["p", serving(B)]])]], "p", B, true],
    ["served it long ago, serves it again", [[0, new Map([["p", serving(A)]])], [1, new Map([["p", idle(A)]])], [2 * SERVED_LATELY_MS, new Map([["p", serving(A)]])]], "p", A, true],
  ])("a member that %s", (_, steps, member, identity, expected) => {
    expect(after(steps).recent.servedLately(member, identity)).toBe(expected);
  });

  test("a stop is dated when it is heard, not when serving was first heard", () => {
    const { recent, now } = after([
      [0, new Map([["p", serving(A)]])],
      [SERVED_LATELY_MS * 3, new Map([["p", serving(A)]])],
      [1, new Map([["p", idle(A)]])],
    ]);
    expect(now()).toBeGreaterThan(SERVED_LATELY_MS);
    expect(recent.servedLately("p", A)).toBe(true);
  });
});
