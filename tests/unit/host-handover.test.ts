/**
 * When another node becomes a model's host, whether our server that answers goes (`yieldsTo`): only
 * on what this node saw itself. Theirs answered before ours, the new host is one of our workers (its rpc-server holds our
 * layers and serves one client at a time: seen in the multi-model e2e, b hosted over c, then c was
 * elected host over b, and c's load waited for b's server to let its rpc-server go), or our layout
 * lost a worker. Another member's claims (more memory, a server of its own, a layout naming our
 * workers or us) never take the model from us.
 */
import { describe, expect, test } from "bun:test";
import type { NodeView } from "../../mesh/catalog.ts";
import { yieldsTo } from "../../mesh/election.ts";
import { ServingSince } from "../../node/serving-since.ts";

const members = new Set(["b", "c", "d", "e", "f"]);
test.each([
  ["solo server, another node elected (it claims more memory): ours stays", "", "c", false],
  ["solo server, never loaded over anyone: ours stays", undefined, "c", false],
  ["their host was our worker: ours goes", "c", "c", true],
  ["their host is one of several workers of ours: ours goes", "d,c", "c", true],
  ["our workers are none of theirs, all present: ours stays", "d,e", "c", false],
  ["a claim naming our worker in its layout, its host not ours: ours stays", "d", "f", false],
  ["one of our workers left the mesh: ours goes", "d,gone", "c", true],
] as const)("%s", (_, ourWorkers, host, expected) => {
  expect(yieldsTo({ workers: ourWorkers, answeredFirst: false }, { host }, (id) => members.has(id))).toBe(expected);
});

test.each([
  ["theirs answered before ours (ours loaded on a view that had not heard of it): ours goes", true, true],
  ["theirs claims to answer after ours did: ours stays", false, false],
])("%s", (_, answeredFirst, expected) => {
  expect(yieldsTo({ workers: "", answeredFirst }, { host: "c" }, (id) => members.has(id))).toBe(expected);
});

describe("ServingSince: what this node saw itself", () => {
  const view = (nodeId: string, ready: string[]): NodeView => ({ nodeId, vramBytes: 1, modelsOnDisk: [], assigned: undefined, ready, idle: [] });
  test("a server seen before ours answered first; one seen after did not; one seen at once did", () => {
    const s = new ServingSince();
    s.saw([view("me", []), view("early", ["m"])]);
    s.saw([view("me", ["m"]), view("early", ["m"]), view("both", ["m"])]);
    s.saw([view("me", ["m"]), view("early", ["m"]), view("both", ["m"]), view("late", ["m"])]);
    expect(s.answeredFirst("early", "me", "m")).toBe(true);
    expect(s.answeredFirst("both", "me", "m")).toBe(true);
    expect(s.answeredFirst("late", "me", "m")).toBe(false);
    expect(s.answeredFirst("nobody", "me", "m")).toBe(false);
  });

  test("a server that stopped answering starts afresh: coming back after ours, it is not first", () => {
    const s = new ServingSince();
    s.saw([view("me", []), view("x", ["m"])]);
    s.saw([view("me", ["m"]), view("x", [])]);
    s.saw([view("me", ["m"]), view("x", ["m"])]);
    expect(s.answeredFirst("x", "me", "m")).toBe(false);
  });
});
