/**
 * How a node gets a model it was assigned (issue 14, one download per mesh): copied from a peer
 * that has it; otherwise pulled by the one member the catalog names, by the operator's own
 * reference or source first, else by what the mesh announced (a peer's URL under the peer rule);
 * every other member waits for that one and copies from it.
 */
import { describe, expect, test } from "bun:test";
import type { CatalogModel } from "../../placement/catalog.ts";
import { fetchedFrom, fetchPlan, type FetchPlan, type OwnOrigin } from "../../node/fetch-plan.ts";
import { modelArg, NodeSetupError, type ModelArg } from "../../node/model-arg.ts";

const entry = (over: Partial<CatalogModel>): CatalogModel => ({
  name: "m",
  source: undefined,
  sizeBytes: 100,
  needBytes: 120,
  nodesOnDisk: [],
  nodesServing: ["me", "b"],
  capacityBytes: 0,
  host: undefined,
  servedBy: undefined,
  servers: [],
  split: false,
  idle: false,
  status: "loading",
  ...over,
  // Holders announce the one identity unless a case says otherwise.
  copyFrom: over.copyFrom ?? over.nodesOnDisk ?? [],
});
const none: OwnOrigin = { ref: undefined, source: undefined };
const HF = "org/repo:Q8_0";
const URL_REF = "https://example.com/m.gguf";

describe("fetchPlan", () => {
  test.each<[string, CatalogModel | undefined, OwnOrigin, number, FetchPlan["kind"] | FetchPlan]>([
    ["holders announce different contents: no copy, wait, saying why", entry({ nodesOnDisk: ["a", "b"], copyFrom: [], contested: true }), none, 0, { kind: "wait", why: expect.stringContaining("different contents") as unknown as string }],
    ["holders announce no identity yet: no copy, wait, saying why", entry({ nodesOnDisk: ["a"], copyFrom: [] }), none, 0, { kind: "wait", why: expect.stringContaining("not announced its content identity") as unknown as string }],
    ["contested, but this node's operator named a reference: downloaded from it", entry({ nodesOnDisk: ["a", "b"], copyFrom: [], contested: true }), { ref: HF, source: undefined }, 0, { kind: "pull", ref: HF, fromPeer: false }],
    ["only some holders announce the identity: copied from those", entry({ nodesOnDisk: ["a", "b"], copyFrom: ["b"] }), none, 0, { kind: "peer", peer: "b" }],
    ["a peer has it: copy it from the peer", entry({ nodesOnDisk: ["a"], ref: HF, puller: undefined }), { ref: HF, source: undefined }, 0, { kind: "peer", peer: "a" }],
    ["several peers: taken in turn over tries", entry({ nodesOnDisk: ["a", "b", "me"] }), none, 3, { kind: "peer", peer: "b" }],
    ["only this node has it listed (a rescan pending): not a peer", entry({ nodesOnDisk: ["me"], ref: HF, puller: "me" }), none, 0, { kind: "pull", ref: HF, fromPeer: true }],
    ["this node pulls, by its operator's reference", entry({ ref: "org/other:Q4_K_M", puller: "me" }), { ref: HF, source: undefined }, 0, { kind: "pull", ref: HF, fromPeer: false }],
    ["this node pulls, by its operator's source", entry({ ref: HF, puller: "me" }), { ref: undefined, source: URL_REF }, 0, { kind: "url", url: URL_REF, fromPeer: false }],
    ["this node pulls a peer's Hub reference (from its own Hub endpoint)", entry({ ref: HF, puller: "me" }), none, 0, { kind: "pull", ref: HF, fromPeer: true }],
    ["a peer's URL reference is a peer's URL: the peer rule and size cap", entry({ ref: URL_REF, puller: "me" }), none, 0, { kind: "url", url: URL_REF, fromPeer: true }],
    ["a peer's source, when no reference", entry({ source: URL_REF, puller: "me" }), none, 0, { kind: "url", url: URL_REF, fromPeer: true }],
    ["another member pulls: wait, even with a reference of our own", entry({ ref: HF, puller: "b" }), { ref: HF, source: URL_REF }, 0, "wait"],
    ["no puller named and nothing of our own to pull by: wait", entry({}), none, 0, "wait"],
    ["not in the catalog yet, but our operator named where to get it: pull", undefined, { ref: HF, source: undefined }, 0, { kind: "pull", ref: HF, fromPeer: false }],
    ["not in the catalog and nothing of our own: wait", undefined, none, 0, "wait"],
  ])("%s", (_, m, own, attempt, expected) => {
    const plan = fetchPlan(m, "me", own, attempt);
    if (typeof expected === "string") expect(plan.kind).toBe(expected);
    else expect(plan).toEqual(expected);
  });

  test("a node still joining its mesh pulls nothing, even as the puller; a peer's copy it takes", () => {
    const own = { ref: HF, source: undefined };
    expect(fetchPlan(entry({ ref: HF, puller: "me" }), "me", own, 0, true).kind).toBe("wait");
    expect(fetchPlan(undefined, "me", own, 0, true).kind).toBe("wait");
    expect(fetchPlan(entry({ nodesOnDisk: ["a"] }), "me", own, 0, true)).toEqual({ kind: "peer", peer: "a" });
  });

  test("a holder that sent other files than the model's content lately is not asked; the others are, and with none left the node waits, saying why", () => {
    const both = entry({ nodesOnDisk: ["a", "b"] });
    expect([0, 1, 2].map((attempt) => fetchPlan(both, "me", none, attempt, false, new Set(["a"])))).toEqual([0, 1, 2].map(() => ({ kind: "peer", peer: "b" })));
    expect(fetchPlan(both, "me", none, 0, false, new Set(["a", "b"]))).toEqual({ kind: "wait", why: expect.stringContaining("sent other files") as unknown as string });
    // This node's operator named a reference: downloaded from it instead.
    expect(fetchPlan(both, "me", { ref: HF, source: undefined }, 0, false, new Set(["a", "b"]))).toEqual({ kind: "pull", ref: HF, fromPeer: false });
  });
});

describe("--model values", () => {
  const files = new Set(["/models/a.gguf", "rel/b.gguf"]);
  const known = new Set(["local", "dir/sub"]);
  test.each<[string, ModelArg | string]>([
    ["/models/a.gguf", { kind: "path", path: "/models/a.gguf" }],
    ["rel/b.gguf", { kind: "path", path: "rel/b.gguf" }],
    ["local", { kind: "name", name: "local" }],
    // A model of ours in a subfolder is ours, not a repository on the Hub.
    ["dir/sub", { kind: "name", name: "dir/sub" }],
    ["org/repo:Q8_0", { kind: "name", name: "org/repo:Q8_0", ref: "org/repo:Q8_0" }],
    [" hf.co/org/repo:Q8_0", { kind: "name", name: "hf.co/org/repo:Q8_0", ref: "hf.co/org/repo:Q8_0" }],
    ["https://example.com/dir/tiny.gguf", { kind: "name", name: "tiny", ref: "https://example.com/dir/tiny.gguf" }],
    ["qwen2.5-0.5b-instruct", { kind: "name", name: "qwen2.5-0.5b-instruct", ref: "qwen2.5-0.5b-instruct" }],
    ["someone-elses", { kind: "name", name: "someone-elses" }],
    ["/no/such.gguf", "no such file"],
    ["./missing", "no such file"],
    ["missing.gguf", "no such file"],
    ["dir/missing.gguf", "no such file"],
    ["org/repo:Q8:0", "is not a model reference"],
  ])("%p", (value, expected) => {
    const read = () => modelArg(value, (p) => files.has(p), (n) => known.has(n));
    if (typeof expected === "string") {
      expect(read).toThrow(NodeSetupError);
      expect(read).toThrow(expected);
    } else expect(read()).toEqual(expected);
  });
});

describe("where a fetch says it comes from (announced with its progress)", () => {
  test.each<[string, Exclude<FetchPlan, { kind: "wait" }>, string]>([
    ["a peer", { kind: "peer", peer: "b" }, "b"],
    ["a Hub reference", { kind: "pull", ref: HF, fromPeer: false }, HF],
    ["a URL", { kind: "url", url: URL_REF, fromPeer: false }, URL_REF],
    // The operator's own source or reference may carry a password: peers never see it.
    ["a source with a password", { kind: "url", url: "https://user:s3cret@example.com/m.gguf", fromPeer: false }, "https://example.com/m.gguf"],
    ["a reference with a token as user", { kind: "pull", ref: "https://tok3n@example.com/m.gguf", fromPeer: false }, "https://example.com/m.gguf"],
  ])("%s", (_, plan, from) => expect(fetchedFrom(plan)).toBe(from));
});
