/**
 * When another node becomes a model's host, whether ours must go at once rather than once theirs
 * answers: when their split needs an rpc-server that ours holds (rpc-server serves one client at a
 * time), waiting would deadlock both loads. Seen in the multi-model e2e: b hosted over c, then c
 * (more memory) was elected host over b; c's load waited for b's rpc-server, b's unload for c's answer.
 */
import { expect, test } from "bun:test";
import { holdsWhatTheyNeed } from "../../placement/election.ts";

test.each([
  ["solo server, not in their split: ours answers until theirs does", "b", "", { host: "c", workers: ["d"] }, false],
  ["solo server, never loaded over anyone", "b", undefined, { host: "c", workers: [] }, false],
  ["we are one of their workers", "b", "", { host: "c", workers: ["b", "d"] }, true],
  ["their host was our worker", "b", "c", { host: "c", workers: ["d"] }, true],
  ["one of their workers is one of ours", "b", "d,e", { host: "c", workers: ["e"] }, true],
  ["our workers are none of theirs", "b", "d,e", { host: "c", workers: ["f"] }, false],
])("%s", (_, self, ourWorkers, plan, expected) => {
  expect(holdsWhatTheyNeed(self, ourWorkers, plan)).toBe(expected);
});
