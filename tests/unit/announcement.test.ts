/**
 * Announcement limits are the same on sender and receiver (issue 12, hole 9): the sender trims to
 * what the schema accepts and to what fits a control message, with one log line per change, and
 * the catalog built from announcements is worked out once per change, not per request.
 */
import { describe, expect, test } from "bun:test";
import { announcedDemand, announcedRef, AnnouncementSource, describeLeftOut, fitAnnouncement, fitModels, type AnnouncementContent, type ModelLists } from "../../mesh/announcement.ts";
import { ANNOUNCEMENT_LIMITS as L, AnnouncementSchema, ControlMessageSchema, PROTOCOL_VERSION } from "../../mesh/messages.ts";
import { encodeFrame, MAX_CONTROL_MESSAGE } from "../../streams/wire.ts";
import type { ModelInfo, ModelStore } from "../../models/model-store.ts";
import type { Pool } from "../../pool/pool.ts";
import type { ModelFetcher } from "../../node/model-fetcher.ts";
import { ModelAnnouncer } from "../../node/model-announcer.ts";
import { PeerTable } from "../../mesh/peer-table.ts";
import { MeshViewCache } from "../../node/mesh-view.ts";
import { GroupState } from "../../node/group-state.ts";
import { GroupReconciler } from "../../node/group-reconciler.ts";
import { SplitPlanner } from "../../node/split-planner.ts";
import { needAt } from "../../node/model-fields.ts";
import type { Log } from "../../base/log.ts";
import { fakeAnnouncement } from "../../harness/rogue-peer.ts";

const disk = (n: number, over: (i: number) => Partial<ModelLists["modelsOnDisk"][number]> = () => ({})) =>
  Array.from({ length: n }, (_, i) => ({ name: `model-${String(i).padStart(5, "0")}`, size: 1e9 + i, need: 2e9 + i, ...over(i) }));
const seeds = (n: number) => Array.from({ length: n }, (_, i) => ({ name: `seed-${i}`, source: `https://huggingface.co/org/repo-${i}/resolve/main/seed-${i}.gguf` }));
const longSource = (i: number) => ({ source: `https://huggingface.co/org/${"r".repeat(200)}-${i}/resolve/main/file.gguf` });
const bytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v));

function content(over: Partial<AnnouncementContent> = {}): AnnouncementContent {
  const { instance: _i, seq: _s, ...rest } = fakeAnnouncement("n".repeat(64));
  return { ...rest, addresses: ["127.0.0.1:4433", "[::1]:4434"], ...over };
}

describe("fitModels: the sender trims to what peers accept", () => {
  const none = new Set<string>();
  test("lists within every limit pass unchanged", () => {
    const lists = { modelsOnDisk: disk(10), seeds: seeds(3) };
    expect(fitModels(lists, none, L.modelBytes)).toEqual({ lists, left: { invalid: [], modelsOnDisk: 0, seeds: 0 } });
  });
  test("more seeds than the limit: cut to it", () => {
    const { lists, left } = fitModels({ modelsOnDisk: [], seeds: seeds(L.seeds + 44) }, none, Number.POSITIVE_INFINITY);
    expect(lists.seeds).toHaveLength(L.seeds);
    expect(left.seeds).toBe(44);
  });
  test("more models than the limit: cut to it", () => {
    const { lists, left } = fitModels({ modelsOnDisk: disk(L.modelsOnDisk + 4), seeds: [] }, none, Number.POSITIVE_INFINITY);
    expect(lists.modelsOnDisk).toHaveLength(L.modelsOnDisk);
    expect(left.modelsOnDisk).toBe(4);
  });
  test("over the byte budget: seeds go first, then models, and what stays fits", () => {
    const all = { modelsOnDisk: disk(1_000, longSource), seeds: seeds(100) };
    const { lists, left } = fitModels(all, none, L.modelBytes);
    expect(lists.seeds).toEqual([]);
    expect(left.seeds).toBe(100);
    expect(left.modelsOnDisk).toBeGreaterThan(0);
    expect(bytes(lists)).toBeLessThanOrEqual(L.modelBytes);
    // What stays is a prefix, in the order given.
    expect(lists.modelsOnDisk).toEqual(all.modelsOnDisk.slice(0, lists.modelsOnDisk.length));
  });
  test("the models this node serves or is assigned stay, whatever their place", () => {
    const all = disk(1_000, longSource);
    const keep = new Set([all[999]!.name, all[500]!.name]);
    const { lists } = fitModels({ modelsOnDisk: all, seeds: [] }, keep, L.modelBytes);
    expect(lists.modelsOnDisk.map((m) => m.name)).toContain(all[999]!.name);
    expect(lists.modelsOnDisk.map((m) => m.name)).toContain(all[500]!.name);
  });
  test("entries peers would refuse are left out and named", () => {
    const bad = [
      { name: "n".repeat(L.name + 1), size: 1, need: 1 },
      { name: "no-url", size: 1, need: 1, source: "not a url" },
      { name: "long-url", size: 1, need: 1, source: `https://example.com/${"x".repeat(L.source)}` },
      { name: "negative", size: -1, need: 1 },
    ];
    const { lists, left } = fitModels({ modelsOnDisk: [...disk(2), ...bad], seeds: [{ name: "seed-no-url", source: "ftp:/x y" }] }, none, L.modelBytes);
    expect(lists.modelsOnDisk.map((m) => m.name)).toEqual(["model-00000", "model-00001"]);
    expect(left.invalid).toEqual(["n".repeat(80), "no-url", "long-url", "negative", "seed-no-url"]);
  });
  test("the log line says what was left out and the limits", () => {
    expect(describeLeftOut({ invalid: [], modelsOnDisk: 0, seeds: 0 }, { modelsOnDisk: 3, seeds: 0 })).toBeUndefined();
    expect(describeLeftOut({ invalid: ["x"], modelsOnDisk: 200, seeds: 10 }, { modelsOnDisk: 1_000, seeds: 300 })).toBe(
      `the announcement leaves out 200 of 1000 models on disk; 10 of 300 registry seeds; 1 peers would refuse (a name over ${L.name} characters, or a source that is not a URL of at most ${L.source}): x. ` +
        `It carries at most ${L.modelsOnDisk} models, ${L.seeds} seeds and 128 KiB of them; peers do not see the rest`,
    );
  });
});

describe("what the sender sends, the receiver accepts", () => {
  test.each([
    ["more seeds than the receiver's old limit of 256", content({ seeds: seeds(300) })],
    ["4,096 models with long sources", content({ modelsOnDisk: disk(4_096, longSource) })],
    ["5,000 models with short names", content({ modelsOnDisk: disk(5_000) })],
    ["a name too long and a source that is no URL", content({ modelsOnDisk: [...disk(3), { name: "x".repeat(300), size: 1, need: 1 }], seeds: [{ name: "s", source: "nope" }] })],
    ["too many served, idle and recent models", content({ serving: disk(300).map((m) => m.name), idle: disk(300).map((m) => m.name), lastRequest: Object.fromEntries(disk(300).map((m) => [m.name, 1])) })],
  ])("%s: trimmed, accepted, and a hello with it fits a control message", (_, raw) => {
    const { announcement } = new AnnouncementSource(() => raw).current();
    const parsed = AnnouncementSchema.safeParse(announcement);
    expect(parsed.success ? "accepted" : parsed.error.issues[0]?.message).toBe("accepted");
    expect(bytes(announcement)).toBeLessThanOrEqual(L.bytes + 200);
    // A hello carries the announcement and up to a few hundred members.
    const members = Array.from({ length: 300 }, (_, i) => ({ nodeId: `${i}`.padStart(64, "f"), addresses: ["127.0.0.1:65535", "[::1]:65535"] }));
    const hello = { v: PROTOCOL_VERSION, type: "hello", announcement, members };
    expect(() => encodeFrame(hello)).not.toThrow();
    expect(ControlMessageSchema.safeParse(hello).success).toBe(true);
  });

  test("the served and assigned models survive the trim", () => {
    const models = disk(4_096, longSource);
    const fitted = fitAnnouncement(content({ modelsOnDisk: models, serving: [models[4_000]!.name], assigned: models[4_095]!.name }));
    expect(fitted.modelsOnDisk.map((m) => m.name)).toEqual(expect.arrayContaining([models[4_000]!.name, models[4_095]!.name]));
  });

  test("the byte budget leaves room under the control message cap", () => {
    expect(L.bytes).toBeLessThan(MAX_CONTROL_MESSAGE);
    expect(L.modelBytes).toBeLessThan(L.bytes);
  });
});

describe("the announcer and the mesh view: trims with one log line per change, and works the catalog out once per change", () => {
  function setup(count: number) {
    const warnings: string[] = [];
    const log = { info: () => undefined, warn: (msg: string) => void warnings.push(msg), error: () => undefined, debug: () => undefined } as unknown as Log;
    const info = (name: string): ModelInfo =>
      ({ name, path: `/m/${name}.gguf`, files: [], mmproj: undefined, sizeBytes: 1e9, ctxSize: 512, source: longSource(0).source, facts: undefined, problem: undefined }) as unknown as ModelInfo;
    let list: ModelInfo[] = Array.from({ length: count }, (_, i) => info(`model-${String(i).padStart(5, "0")}`));
    const store = { list: () => list } as unknown as ModelStore;
    const pool = { loaded: () => [], server: () => undefined, isLoading: () => false } as unknown as Pool;
    const fetcher = { progress: undefined, enabled: true, cancel: () => undefined, changed: () => undefined } as unknown as ModelFetcher;
    const needOf = needAt(512);
    // The node's parts as `createNode` builds them: the announcer, the view that reads it, the group that feeds both.
    const state = new GroupState(() => false);
    const announcer = new ModelAnnouncer({ store, refs: new Map(), explicit: [], needOf, servers: pool, fetcher, rpcProtocol: () => "3.0.0", group: state, log });
    const view = new MeshViewCache({ selfId: () => undefined, peers: new PeerTable(), vramBytes: 8e9, own: announcer, servers: pool, identities: { of: () => undefined } });
    const splits = new SplitPlanner({ view, group: state, vramBytes: 8e9, needOf, ownRpcEndpoint: () => undefined, tunnelEndpoint: async () => "" });
    const group = new GroupReconciler({ view, splits, store, pool, fetcher, explicit: [], hosts: [], state, announce: () => undefined, guest: () => false, log });
    const models = { announced: () => announcer.announced(), catalog: () => view.catalog(), reconcile: () => group.reconcile() };
    return {
      models,
      warnings,
      info,
      set: (models: ModelInfo[]) => void (list = models),
      rescan: (n: number) => (list = Array.from({ length: n }, (_, i) => info(`model-${String(i).padStart(5, "0")}`))),
    };
  }

  test("a source with a user name or password in it is the operator's secret: peers are not told it", () => {
    const { models, set, info } = setup(0);
    set([
      { ...info("secret-seed"), source: "https://user:hunter2@example.com/a.gguf" },
      { ...info("open-seed"), source: "https://example.com/b.gguf" },
    ]);
    const said = JSON.stringify(models.announced());
    expect(said).not.toContain("hunter2");
    expect(said).toContain("https://example.com/b.gguf");
  });

  test("a node with more models than fit says so once per change of its models, not per announcement", () => {
    const { models, warnings, rescan } = setup(2_000);
    for (let i = 0; i < 5; i++) models.announced();
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain("models on disk");
    expect(bytes(models.announced().modelsOnDisk)).toBeLessThanOrEqual(L.modelBytes);
    rescan(2_000);
    models.announced();
    expect(warnings).toHaveLength(1);
    rescan(2_500);
    models.announced();
    expect(warnings).toHaveLength(2);
    rescan(10);
    expect(models.announced().modelsOnDisk).toHaveLength(10);
    expect(warnings).toHaveLength(2);
  });

  test("the catalog is the same object until a change is heard of", () => {
    const { models } = setup(50);
    const first = models.catalog();
    expect(first).toHaveLength(50);
    expect(models.catalog()).toBe(first);
    models.reconcile();
    const second = models.catalog();
    expect(second).not.toBe(first);
    expect(second).toEqual(first);
  });
});

describe("model references in announcements", () => {
  test.each([
    ["org/repo:Q8_0", "org/repo:Q8_0"],
    ["  hf.co/org/repo:Q8_0 ", "org/repo:Q8_0"],
    ["huggingface.co/org/repo/sub/file-Q8_0.gguf", "org/repo/sub/file-Q8_0.gguf"],
    ["https://huggingface.co/org/repo/resolve/main/file.gguf", "org/repo/file.gguf"],
    ["https://huggingface.co/org/repo/resolve/v2/file.gguf", "https://huggingface.co/org/repo/resolve/v2/file.gguf"],
    ["https://example.com/models/tiny.gguf", "https://example.com/models/tiny.gguf"],
    ["org/repo", "org/repo"],
    // A well-known id goes out as the repository it stands for: a peer whose catalog lacks it can still pull it.
    ["qwen2.5-0.5b-instruct", "bartowski/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M"],
    ["a-plain-local-name", undefined],
    ["org/repo:Q8:0", undefined],
    ["ftp://example.com/x.gguf", undefined],
    // The operator's password is not told to the mesh (and no peer could use it: the peer rule refuses it).
    ["https://user:s3cret@example.com/models/tiny.gguf", undefined],
    ["https://token@example.com/models/tiny.gguf", undefined],
  ])("announcedRef(%p) = %p", (text, expected) => expect(announcedRef(text)).toBe(expected as string | undefined));
  test("a reference over the length limit is not announced", () => expect(announcedRef(`https://example.com/${"x".repeat(L.ref)}.gguf`)).toBeUndefined());

  const model = { name: "org/repo:Q8_0", size: 1, need: 2 };
  test("a reference peers can read travels with the model on disk and with a seed", () => {
    const raw = content({ modelsOnDisk: [{ ...model, ref: "org/repo:Q8_0" }], seeds: [{ name: "later", ref: "org/later:Q4_K_M" }] });
    const parsed = AnnouncementSchema.parse(new AnnouncementSource(() => raw).current().announcement);
    expect(parsed.modelsOnDisk).toEqual([{ ...model, ref: "org/repo:Q8_0" }]);
    expect(parsed.seeds).toEqual([{ name: "later", ref: "org/later:Q4_K_M" }]);
  });

  test.each([
    ["over the length limit", `https://example.com/${"x".repeat(L.ref)}.gguf`],
    ["unreadable", "org/repo:Q8:0"],
    ["not a reference at all", "just-a-name"],
    ["a scheme no pull speaks", "file:///etc/passwd.gguf"],
    ["not a string", 42],
  ])("a junk reference from a peer (%s) is dropped; the model and the announcement stay", (_, junk) => {
    const announcement = { ...fakeAnnouncement("p".repeat(64)), modelsOnDisk: [{ ...model, ref: junk }], seeds: [{ name: "s", source: "https://example.com/s.gguf", ref: junk }] };
    const parsed = AnnouncementSchema.safeParse(announcement);
    expect(parsed.success).toBe(true);
    expect(parsed.data!.modelsOnDisk).toEqual([{ ...model, ref: undefined }]);
    expect(parsed.data!.modelsOnDisk[0]!.ref).toBeUndefined();
    expect(parsed.data!.seeds).toEqual([{ name: "s", source: "https://example.com/s.gguf", ref: undefined }]);
    // And the whole control message with it.
    expect(ControlMessageSchema.safeParse({ v: PROTOCOL_VERSION, type: "announce", announcement }).success).toBe(true);
  });

  test("the sender leaves off a reference peers would drop, and a seed left with nothing to get it from", () => {
    const lists = {
      modelsOnDisk: [{ ...model, ref: "org/repo:Q8:0" }],
      seeds: [
        { name: "by-ref", ref: "org/repo:Q8:0" },
        { name: "by-source", source: "https://example.com/s.gguf", ref: "org/repo:Q8:0" },
      ],
    };
    const { lists: out, left } = fitModels(lists, new Set(), L.modelBytes);
    expect(out).toEqual({ modelsOnDisk: [model], seeds: [{ name: "by-source", source: "https://example.com/s.gguf" }] });
    expect(left.invalid).toEqual(["by-ref"]);
    // fitAnnouncement (the last guard) does the same.
    const fitted = fitAnnouncement(content(lists));
    expect(fitted.modelsOnDisk).toEqual([model]);
    expect(fitted.seeds.map((x) => x.name)).toEqual(["by-source"]);
  });
});

describe("what a peer says of its running layout and a failed load", () => {
  const announce = (over: Record<string, unknown>) => AnnouncementSchema.safeParse({ ...new AnnouncementSource(() => content()).current().announcement, ...over });
  test.each<[string, Record<string, unknown>, boolean]>([
    ["a layout of distinct workers", { layout: ["a", "b"] }, true],
    ["refused: a worker named twice (it would count its memory twice)", { layout: ["a", "a"] }, false],
    ["refused: more workers than the limit", { layout: Array.from({ length: L.layout + 1 }, (_, i) => `w${i}`) }, false],
    ["a failed load", { loadFailed: { model: "m", error: "exited", retryInS: 20 } }, true],
    ["refused: a retry that is no whole number of seconds (a Retry-After header)", { loadFailed: { model: "m", error: "x", retryInS: 12.5 } }, false],
    ["refused: a retry beyond a day", { loadFailed: { model: "m", error: "x", retryInS: 1e21 } }, false],
    ["refused: an error over the limit", { loadFailed: { model: "m", error: "x".repeat(L.error + 1), retryInS: 1 } }, false],
  ])("%s", (_, over, ok) => expect(announce(over).success).toBe(ok));
  test("an error's control characters become spaces: it is shown to clients as one line", () => {
    const parsed = announce({ loadFailed: { model: "m", error: "bad\r\nX-Injected: 1\u0000", retryInS: 1 } });
    expect(parsed.success && parsed.data.loadFailed?.error).toBe("bad  X-Injected: 1 ");
  });
});

describe("demand: the queues' figures ride on heartbeats", () => {
  const demand = (queued: number) => [{ model: "m", slots: 2, inFlight: 2, queued, waitMs: 120 }];
  test("a change of demand alone is no change to send at once; the announcement handed out carries it all the same", () => {
    let queued = 0;
    const source = new AnnouncementSource(() => content({ demand: demand(queued) }));
    const first = source.current();
    expect(first.changed).toBe(true);
    queued = 5;
    const next = source.current();
    expect(next.changed).toBe(false);
    expect(next.announcement.seq).toBe(first.announcement.seq);
    expect(next.announcement.demand).toEqual(demand(5));
    // Any other change still is one.
    const moved = new AnnouncementSource(() => content({ demand: demand(queued), serving: queued > 5 ? ["m"] : [] }));
    moved.current();
    queued = 6;
    expect(moved.current().changed).toBe(true);
  });

  const peer = (over: Record<string, unknown>) => AnnouncementSchema.parse({ ...new AnnouncementSource(() => content()).current().announcement, ...over });
  test.each<[string, unknown, unknown[]]>([
    ["figures within their ranges are kept", demand(3), demand(3)],
    ["none said (an older node): none", undefined, []],
    ["junk: not a list", "lots", []],
    ["junk: a negative queue", [{ model: "m", slots: 1, inFlight: 0, queued: -1, waitMs: 0 }], []],
    ["junk: a fractional slot count", [{ model: "m", slots: 1.5, inFlight: 0, queued: 0, waitMs: 0 }], []],
    ["junk: a wait over a day", [{ model: "m", slots: 1, inFlight: 0, queued: 0, waitMs: 1e12 }], []],
    ["junk: a name over the limit", [{ model: "x".repeat(L.name + 1), slots: 1, inFlight: 0, queued: 0, waitMs: 0 }], []],
    ["junk: more entries than models a node may serve", Array.from({ length: L.serving + 1 }, () => demand(0)[0]), []],
  ])("from a peer, %s; the peer is kept", (_, value, want) => {
    expect(peer(value === undefined ? {} : { demand: value }).demand).toEqual(want as never);
  });

  test("announcedDemand: the sender keeps to what peers accept", () => {
    const figures = [
      { model: "ok", slots: 4, inFlight: 1, queued: 2, waitMs: 12.7 },
      { model: "x".repeat(L.name + 1), slots: 1, inFlight: 0, queued: 0, waitMs: 0 },
      { model: "huge", slots: 10_000, inFlight: 2e6, queued: Number.NaN, waitMs: 1e12 },
    ];
    expect(announcedDemand(figures)).toEqual([
      { model: "ok", slots: 4, inFlight: 1, queued: 2, waitMs: 13 },
      { model: "huge", slots: 4096, inFlight: 1_000_000, queued: 0, waitMs: 86_400_000 },
    ]);
    const many = Array.from({ length: L.serving + 10 }, (_, i) => ({ model: `m${i}`, slots: 1, inFlight: 0, queued: 0, waitMs: 0 }));
    const sent = announcedDemand(many);
    expect(sent).toHaveLength(L.serving);
    expect(AnnouncementSchema.parse({ ...new AnnouncementSource(() => content({ demand: sent })).current().announcement }).demand).toEqual(sent);
  });
});
