/**
 * Whether a model a peer has is copied from it or downloaded afresh (`copySource`): a copy over
 * the direct path, or of a model with no hub to download it from, stays with the peer; one over
 * the mesh connection is measured, the hub tried when its speed is not known, and the hub taken
 * only when it is faster by the margin.
 */
import { describe, expect, test } from "bun:test";
import { copySource, formatRate, HUB_MARGIN, type CopySituation, type CopySource } from "../../node/copy-source.ts";

const MB = 1e6;

describe("copySource", () => {
  test.each<[string, CopySituation, CopySource]>([
    ["direct path: the peer, however fast the hub", { path: "direct", hasHub: true, meshRate: 14 * MB, hubRate: 112 * MB }, "peer"],
    ["direct path, the hub not measured: the peer, and the hub is not tried", { path: "direct", hasHub: true, meshRate: 14 * MB, hubRate: undefined }, "peer"],
    ["mesh connection, no hub to download from: the peer", { path: "mesh", hasHub: false, meshRate: 14 * MB, hubRate: 112 * MB }, "peer"],
    ["mesh connection, not measured yet: the copy goes on, measured", { path: "mesh", hasHub: true, meshRate: undefined, hubRate: undefined }, "peer"],
    ["mesh connection not measured, the hub known fast: nothing to compare yet", { path: "mesh", hasHub: true, meshRate: undefined, hubRate: 112 * MB }, "peer"],
    ["mesh connection measured, the hub not: try the hub", { path: "mesh", hasHub: true, meshRate: 14 * MB, hubRate: undefined }, "measure-hub"],
    ["the hub much faster: the hub", { path: "mesh", hasHub: true, meshRate: 14 * MB, hubRate: 112 * MB }, "hub"],
    ["the hub faster by more than the margin: the hub", { path: "mesh", hasHub: true, meshRate: 14 * MB, hubRate: 18 * MB }, "hub"],
    ["the hub faster by exactly the margin: the peer (no flapping)", { path: "mesh", hasHub: true, meshRate: 14 * MB, hubRate: 14 * MB * HUB_MARGIN }, "peer"],
    ["the hub faster within the margin: the peer", { path: "mesh", hasHub: true, meshRate: 14 * MB, hubRate: 17 * MB }, "peer"],
    ["the hub slower: the peer", { path: "mesh", hasHub: true, meshRate: 14 * MB, hubRate: 3 * MB }, "peer"],
    ["the copy stalled and the hub moves: the hub", { path: "mesh", hasHub: true, meshRate: 0, hubRate: 1 * MB }, "hub"],
    ["both stalled: the peer", { path: "mesh", hasHub: true, meshRate: 0, hubRate: 0 }, "peer"],
  ])("%s", (_, situation, expected) => expect(copySource(situation)).toBe(expected));
});

describe("formatRate", () => {
  test.each<[number, string]>([
    [112 * MB, "112 MB/s"],
    [14.4 * MB, "14 MB/s"],
    [2.44 * MB, "2.4 MB/s"],
    [0, "0.0 MB/s"],
  ])("%p bytes/s reads %p", (rate, text) => expect(formatRate(rate)).toBe(text));
});
