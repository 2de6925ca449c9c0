import { describe, expect, test } from "bun:test";
import { fitOf, type Fit } from "../../models/catalog-fit.ts";
import { catalogListing } from "../../router/dialects/catalog-listing.ts";

const GiB = 2 ** 30;

describe("fitOf: does a well-known model fit this mesh", () => {
  const cases: [what: string, size: number, nodes: number[], fit: Fit][] = [
    ["fits the one node", 4 * GiB, [8 * GiB], "one-node"],
    ["fits the largest of several", 4 * GiB, [2 * GiB, 8 * GiB], "one-node"],
    ["headroom counts: 10% over the file is too much for one node", 7.5 * GiB, [8 * GiB], "none"],
    ["headroom counts, and two nodes hold it", 7.5 * GiB, [8 * GiB, 1 * GiB], "split"],
    ["no node alone, the mesh together", 10 * GiB, [8 * GiB, 8 * GiB], "split"],
    ["not even together", 30 * GiB, [8 * GiB, 8 * GiB], "none"],
    ["a single node too small is no split", 10 * GiB, [8 * GiB], "none"],
    ["no nodes known", 1 * GiB, [], "none"],
  ];
  test.each(cases)("%s", (_, size, nodes, fit) => {
    const v = fitOf(size, nodes);
    expect(v.fit).toBe(fit);
    expect(v.needBytes).toBe(Math.ceil(size * 1.1));
    expect(v.reason).toMatch(/^needs \d+\.\d GiB/);
  });
});

describe("catalogListing", () => {
  const known = [
    { id: "small", repo: "org/small-GGUF", quant: "Q4_K_M", sizeBytes: 1 * GiB, contextLength: 32768, description: "a small one" },
    { id: "huge", repo: "org/huge-GGUF", quant: "Q4_K_M", sizeBytes: 100 * GiB, contextLength: 8192, description: "a huge one" },
  ];
  test("each entry: its pull reference, whether it is here, and whether it fits", () => {
    const list = catalogListing(known, new Set(["small"]), [4 * GiB]);
    expect(list.object).toBe("list");
    expect(list.data[0]).toMatchObject({ id: "small", object: "model", owned_by: "catalog", checkpoint: "org/small-GGUF:Q4_K_M", size: GiB, context_length: 32768, downloaded: true, fit: "one-node" });
    expect(list.data[1]).toMatchObject({ id: "huge", downloaded: false, fit: "none" });
    expect(list.data[1]!.fit_reason).toContain("the 1 node of this mesh offer 4.0 GiB");
  });
});
