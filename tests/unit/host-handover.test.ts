/**
 * When another node becomes a model's host, whether our server that answers goes (`yieldsTo`): only
 * on what this node knows itself. The new host is one of our workers (its rpc-server holds our
 * layers and serves one client at a time: seen in the multi-model e2e, b hosted over c, then c was
 * elected host over b, and c's load waited for b's server to let its rpc-server go), or our layout
 * lost a worker. Another member's claims (more memory, a server of its own, a layout naming our
 * workers or us) never take the model from us.
 */
import { expect, test } from "bun:test";
import { yieldsTo } from "../../mesh/election.ts";

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
  expect(yieldsTo(ourWorkers, { host }, (id) => members.has(id))).toBe(expected);
});
